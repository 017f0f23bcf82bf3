package search_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/search"
)

// TestQueriesAcrossReplacements: at_plus and not_bounded searches, and
// counts, run while an index's definition is replaced again and again (each
// replacement rebuilds it) and while an alias over it answers too. Every one
// is answered, never ErrClosed: a search that loses its index to a
// replacement runs again on the new one; an at_plus search waits for the
// new index to catch up and counts every document. Run with -race.
func TestQueriesAcrossReplacements(t *testing.T) {
	for _, typ := range []engine.BucketType{engine.Couchbase, engine.Ephemeral} {
		t.Run(string(typ), func(t *testing.T) {
			e := newEnv(t, typ, search.Options{BatchSize: 20})
			const n, versions = 60, 8
			for i := range n {
				e.put(fmt.Sprint("d", i), fmt.Sprintf(`{"title":"doc %d","body":"word%d"}`, i, i%7), 0)
			}
			def := func(r int) string {
				return fmt.Sprintf(`{"params":{"mapping":{"default_analyzer":"%s","default_mapping":{"dynamic":true,"properties":{"f%d":{"fields":[{"name":"f%d","type":"text","index":true}]}}}}}}`,
					[]string{"standard", "simple"}[r%2], r, r)
			}
			e.createIndex("i", def(0))
			e.createIndex("a", `{"type":"fulltext-alias","params":{"targets":{"i":{}}}}`)
			ctx := context.Background()
			stop := make(chan struct{})
			completed := make(chan struct{}, 1) // an at_plus answer came
			var wg sync.WaitGroup
			var mu sync.Mutex
			var failures []string
			answered := map[string]int{}
			for _, q := range []struct{ index, kind string }{
				{"i", "at_plus"}, {"i", "at_plus"}, {"i", "not_bounded"}, {"i", "count"}, {"a", "at_plus"}, {"a", "not_bounded"},
			} {
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						var total uint64
						var err error
						if q.kind == "count" {
							total, err = e.svc.Count(ctx, "default", q.index)
						} else {
							req := `{"query":{"match_all":{}},"size":0,"ctl":{"consistency":{"level":"` + q.kind + `"}}}`
							var raw []byte
							if raw, err = e.svc.Query(ctx, "default", q.index, []byte(req)); err == nil {
								var a answer
								if err = json.Unmarshal(raw, &a); err == nil {
									total = a.TotalHits
								}
							}
						}
						switch {
						case err != nil:
						case q.kind == "at_plus" && total != n:
							err = fmt.Errorf("%d hits, want every one of the %d documents", total, n)
						case total > n:
							err = fmt.Errorf("%d hits of %d documents", total, n)
						}
						if err == nil && q.kind == "at_plus" {
							select {
							case completed <- struct{}{}:
							default:
							}
						}
						mu.Lock()
						if err != nil && len(failures) < 10 {
							failures = append(failures, fmt.Sprintf("%s %s: %v", q.index, q.kind, err))
						}
						answered[q.index+" "+q.kind]++
						mu.Unlock()
					}
				})
			}
			for r := 1; r <= versions; r++ {
				if _, err := e.svc.PutIndex(ctx, "default", "i", []byte(def(r))); err != nil {
					t.Error(err)
				}
				// The next replacement waits for a complete answer, so that
				// searches span replacements without being outrun by them.
				select {
				case <-completed:
				case <-time.After(2 * time.Minute):
					t.Fatalf("no at_plus answer in 2 minutes after replacement %d", r)
				}
			}
			close(stop)
			wg.Wait()
			for _, f := range failures {
				t.Error(f)
			}
			t.Logf("answers %v; %d searches ran again on a new index", answered, search.ReplacedRetries(e.svc))
		})
	}
}
