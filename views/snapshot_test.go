package views_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
)

// TestStaleAnswerOneSnapshot: stale=ok and stale=update_after queries of an
// index being built and updated (a feed applying small batches while
// documents are written and deleted) are each answered from one state of
// the index, as in CouchDB and Couchbase: with no range or limit, an
// answer's total_rows is its number of rows (with expired=exclude too).
// Before one Reader answered, total_rows and the rows were each read from
// the index's latest state, and an answer during a build could say
// total_rows 0 over 50 rows. Both index modes; run with -race.
func TestStaleAnswerOneSnapshot(t *testing.T) {
	for _, mode := range indexModes {
		t.Run(mode.name, func(t *testing.T) {
			opts := mode.opts()
			opts.BatchSize = 5
			e := newEnv(t, opts)
			ctx := context.Background()
			const n = 600
			e.loadDocs(n)
			ddoc := `{"views":{"v":{"map":"function (doc, meta) { emit(doc.n, null); }"},` +
				`"c":{"map":"function (doc, meta) { emit(doc.n % 7, 1); }","reduce":"_sum"}}}`
			if _, err := e.svc.PutDesignDoc(ctx, "default", "d", []byte(ddoc)); err != nil {
				t.Fatal(err)
			}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var mu sync.Mutex
			var failures []string
			answers, building := 0, 0
			for _, q := range []struct{ view, params string }{
				{"v", "stale=ok"}, {"v", "stale=update_after"}, {"v", "stale=ok&expired=exclude"},
				{"c", "stale=ok&reduce=false"}, {"v", "stale=ok&descending=true"},
			} {
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						a, err := queryRows(ctx, e.svc, "default", "d", q.view, q.params)
						var ans struct {
							TotalRows *int              `json:"total_rows"`
							Rows      []json.RawMessage `json:"rows"`
						}
						if err == nil {
							err = json.Unmarshal([]byte(a), &ans)
						}
						if err == nil && ans.TotalRows == nil {
							err = fmt.Errorf("no total_rows: %.200s", a)
						}
						if err == nil && *ans.TotalRows != len(ans.Rows) {
							err = fmt.Errorf("total_rows %d with %d rows: not one state of the index", *ans.TotalRows, len(ans.Rows))
						}
						mu.Lock()
						answers++
						if err == nil && len(ans.Rows) > 0 && len(ans.Rows) < n {
							building++
						}
						if err != nil && len(failures) < 10 {
							failures = append(failures, fmt.Sprintf("%s?%s: %v", q.view, q.params, err))
						}
						mu.Unlock()
					}
				})
			}
			// Updates while the index is built: deletions and new documents.
			coll := e.coll()
			for i := 0; i < n; i += 3 {
				if _, err := coll.Delete(ctx, fmt.Sprintf("k%06d", i), nil); err != nil {
					t.Error(err)
				}
				e.put(fmt.Sprintf("x%06d", i), fmt.Sprintf(`{"n":%d}`, n+i))
			}
			// Until the index has caught up, then one more round of answers.
			_ = e.query("d", "v", "stale=false&limit=1")
			close(stop)
			wg.Wait()
			for _, f := range failures {
				t.Error(f)
			}
			t.Logf("%d answers, %d of them from a partial index", answers, building)
			if got := e.query("d", "v", "stale=false&limit=0"); got != fmt.Sprintf(`{"total_rows":%d,"rows":[]}`, n) {
				t.Fatalf("the built index answers %s, want %d rows", got, n)
			}
		})
	}
}
