package views_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/index"
	"github.com/mayflydb/mayfly/jsruntime"
	"github.com/mayflydb/mayfly/views"
)

// indexModes are the two layouts a view index can have: wholly in memory,
// and paged through a small cache (serve's default pages).
var indexModes = []struct {
	name string
	opts func() views.Options
}{
	{"in memory", func() views.Options { return views.Options{} }},
	{"paged", func() views.Options { return views.Options{IndexCache: index.NewPageCache(64 << 10)} }},
}

// TestQuerySpansReplacement: a stale=false query waiting for its index to
// catch up when its design document is replaced is answered, as in
// Couchbase, from the new version's index once that has caught up, when the
// new version still has the view; it is not found when the new version has
// no such view, or the design document was deleted. Never ErrClosed (503).
func TestQuerySpansReplacement(t *testing.T) {
	for _, mode := range indexModes {
		for _, change := range []string{"kept", "removed", "deleted"} {
			t.Run(mode.name+"/"+change, func(t *testing.T) {
				logs := newJSLog()
				opts := mode.opts()
				opts.NoAutoUpdate = true // the query's own catch-up runs the stuck map
				opts.JS = &jsruntime.Options{Timeout: stuckTimeout, Logger: slog.New(logs)}
				e := newEnv(t, opts)
				ctx := context.Background()
				e.loadDocs(2 * stuckN)
				if _, err := e.svc.PutDesignDoc(ctx, "default", "d", stuckMapDDoc("stuck")); err != nil {
					t.Fatal(err)
				}
				type result struct {
					answer string
					err    error
				}
				done := make(chan result, 1)
				go func() {
					a, err := queryRows(ctx, e.svc, "default", "d", "v", "stale=false")
					done <- result{a, err}
				}()
				logs.wait(t, "stuck") // the query waits for a catch-up that cannot end by itself
				returns(t, change, func() error {
					switch change {
					case "kept": // the same view name, another map function
						_, err := e.svc.PutDesignDoc(ctx, "default", "d", []byte(`{"views":{"v":{"map":"function (doc, meta) { if (doc.n % 2 == 0) emit(doc.n, null); }","reduce":"_count"}}}`))
						return err
					case "removed":
						_, err := e.svc.PutDesignDoc(ctx, "default", "d", []byte(`{"views":{"w":{"map":"function (doc, meta) { emit(doc.n, null); }"}}}`))
						return err
					default:
						return e.svc.DeleteDesignDoc(ctx, "default", "d")
					}
				})
				var r result
				returns(t, "the query", func() error { r = <-done; return nil })
				switch change {
				case "kept":
					if r.err != nil {
						t.Fatalf("the query failed: %v", r.err)
					}
					want := fmt.Sprintf(`{"rows":[{"key":null,"value":%d}]}`, stuckN) // every even n of 0..2*stuckN-1
					if got := strings.NewReplacer("\r\n", "", "\n", "").Replace(r.answer); got != want {
						t.Fatalf("answer %s, want the new version's complete answer %s", got, want)
					}
					if n := views.ReplacedRetries(e.svc); n != 1 {
						t.Fatalf("%d queries started again, want 1", n)
					}
				case "removed":
					want := "View `v` not defined in local design document `_design/d`."
					if !errors.Is(r.err, views.ErrNotFound) || !strings.Contains(r.err.Error(), want) {
						t.Fatalf("the query ended with %v, want ErrNotFound saying %q", r.err, want)
					}
				default:
					want := "Design document `_design/d` missing in database `default`."
					if !errors.Is(r.err, views.ErrNotFound) || !strings.Contains(r.err.Error(), want) {
						t.Fatalf("the query ended with %v, want ErrNotFound saying %q", r.err, want)
					}
				}
				if r.err != nil && r.answer != "" {
					t.Fatalf("a failed query wrote %q", r.answer)
				}
			})
		}
	}
}

// TestQueriesAcrossReplacements: many stale=false, stale=ok and
// stale=update_after queries, map and reduce, run while the design document
// is replaced again and again (the same view names, other map functions).
// Every query is answered, whole, from one version's index: a stale=false
// answer is that version's complete, correct answer; a stale=ok answer holds
// rows of one version only, in order. Run with -race.
func TestQueriesAcrossReplacements(t *testing.T) {
	for _, mode := range indexModes {
		t.Run(mode.name, func(t *testing.T) {
			opts := mode.opts()
			opts.BatchSize = 50
			e := newEnv(t, opts)
			ctx := context.Background()
			// Six replacements: six spinning queriers meet each one many
			// times over (twelve cost twice the CPU for the same spans).
			const n, versions = 200, 6
			e.loadDocs(n)
			// Version r: v emits (n, r); c counts the documents by n mod r+2.
			ddoc := func(r int) []byte {
				return []byte(fmt.Sprintf(`{"views":{"v":{"map":"function (doc, meta) { emit(doc.n, %d); }"},`+
					`"c":{"map":"function (doc, meta) { emit(doc.n %% %d, null); }","reduce":"_count"}}}`, r, r+2))
			}
			if _, err := e.svc.PutDesignDoc(ctx, "default", "d", ddoc(0)); err != nil {
				t.Fatal(err)
			}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var mu sync.Mutex
			var failures []string
			answered := map[string]int{}
			completed := make(chan struct{}, 1) // a stale=false answer came
			for _, q := range []struct{ view, params string }{
				{"v", "stale=false"}, {"v", "stale=false"}, {"v", "stale=ok"}, {"v", "stale=update_after"},
				{"c", "stale=false&group=true"}, {"c", "stale=ok&group=true"},
			} {
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						a, err := queryRows(ctx, e.svc, "default", "d", q.view, q.params)
						if err == nil {
							err = checkVersionAnswer(q.view, strings.HasPrefix(q.params, "stale=false"), a, n, versions)
						}
						if err == nil && strings.HasPrefix(q.params, "stale=false") {
							select {
							case completed <- struct{}{}:
							default:
							}
						}
						mu.Lock()
						if err != nil && len(failures) < 10 {
							failures = append(failures, fmt.Sprintf("%s?%s: %v", q.view, q.params, err))
						}
						answered[q.view+"?"+q.params]++
						mu.Unlock()
					}
				})
			}
			for r := 1; r <= versions; r++ {
				if _, err := e.svc.PutDesignDoc(ctx, "default", "d", ddoc(r)); err != nil {
					t.Error(err)
				}
				// The next replacement waits for a complete answer, so that
				// queries span replacements (a stale=false one waits for a
				// build most of the time) but are not outrun by them: a
				// query that loses its index to more than a few replacements
				// in a row ends with ErrClosed (see Query.Run).
				select {
				case <-completed:
				case <-time.After(hangDeadline):
					t.Fatalf("no complete answer in %v after replacement %d", hangDeadline, r)
				}
			}
			close(stop)
			wg.Wait()
			for _, f := range failures {
				t.Error(f)
			}
			t.Logf("answers %v; %d queries started again on a new index", answered, views.ReplacedRetries(e.svc))
			// The last version answers, whole.
			if err := checkVersionAnswer("v", true, e.query("d", "v", "stale=false"), n, versions); err != nil {
				t.Fatal(err)
			}
			if got := e.query("d", "v", "stale=false&limit=1"); !strings.Contains(got, fmt.Sprintf(`"value":%d`, versions)) {
				t.Fatalf("the last version does not answer: %s", got)
			}
		})
	}
}

// checkVersionAnswer checks an answer of TestQueriesAcrossReplacements'
// view (v or c) over n documents: one version's rows only; with complete
// (stale=false), all of them.
func checkVersionAnswer(view string, complete bool, answer string, n, versions int) error {
	var a struct {
		TotalRows *int `json:"total_rows"`
		Rows      []struct {
			ID    string `json:"id"`
			Key   int    `json:"key"`
			Value int    `json:"value"`
		} `json:"rows"`
		Errors []json.RawMessage `json:"errors"`
	}
	if err := json.Unmarshal([]byte(answer), &a); err != nil {
		return fmt.Errorf("not JSON (%v): %.200s", err, answer)
	}
	if a.Errors != nil {
		return fmt.Errorf("an answer with errors: %.300s", answer)
	}
	if view == "v" {
		if a.TotalRows == nil {
			return fmt.Errorf("no total_rows")
		}
		// One snapshot answers: total_rows counts the rows, also while
		// the index is built.
		if *a.TotalRows != len(a.Rows) || len(a.Rows) > n || complete && len(a.Rows) != n {
			return fmt.Errorf("total_rows %d, %d rows, of %d documents", *a.TotalRows, len(a.Rows), n)
		}
		for i, r := range a.Rows {
			if r.Value != a.Rows[0].Value || r.Value < 0 || r.Value > versions {
				return fmt.Errorf("row %d of version %d after rows of version %d", i, r.Value, a.Rows[0].Value)
			}
			if r.ID != fmt.Sprintf("k%06d", r.Key) || i > 0 && r.Key <= a.Rows[i-1].Key || complete && r.Key != i {
				return fmt.Errorf("row %d is %+v", i, r)
			}
		}
		return nil
	}
	// c, grouped: keys 0..m-1 for the version with modulus m, each counting
	// the n in [0, n) of that remainder.
	m := len(a.Rows)
	if complete && (m < 2 || m > versions+2) {
		return fmt.Errorf("%d groups: no version has as many", m)
	}
	total := 0
	for i, r := range a.Rows {
		total += r.Value
		if i > 0 && r.Key <= a.Rows[i-1].Key {
			return fmt.Errorf("group %d is %+v, out of order", i, r)
		}
		if complete && (r.Key != i || r.Value != (n-i+m-1)/m) {
			return fmt.Errorf("group %d of %d is %+v, want key %d counting %d", i, m, r, i, (n-i+m-1)/m)
		}
	}
	if total > n {
		return fmt.Errorf("groups count %d documents of %d", total, n)
	}
	return nil
}
