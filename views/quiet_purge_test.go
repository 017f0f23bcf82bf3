package views_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/index"
	"github.com/mayflydb/mayfly/views"
)

// TestPurgeAfterPagedIndexCaughtUp deletes documents a paged view
// index has indexed, brings the index up to date (stale=false) and runs the
// metadata purge past the tombstones' age: an index that has caught up holds
// the purge back no longer.
func TestPurgeAfterPagedIndexCaughtUp(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts views.Options
	}{{"in memory", views.Options{}}, {"paged", views.Options{IndexCache: index.NewPageCache(1 << 20)}}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.opts)
			ctx := context.Background()
			if _, err := e.svc.PutDesignDoc(ctx, "default", "d", []byte(`{"views":{"n":{"map":"function (doc, meta) { emit(doc.n, null); }"}}}`)); err != nil {
				t.Fatal(err)
			}
			for i := range 10 {
				e.put(fmt.Sprint("k", i), fmt.Sprintf(`{"n":%d}`, i))
			}
			for i := range 10 {
				if _, err := e.coll().Delete(ctx, fmt.Sprint("k", i), nil); err != nil {
					t.Fatal(err)
				}
			}
			if got := e.query("d", "n", "stale=false"); got != `{"total_rows":0,"rows":[]}` {
				t.Fatalf("after the deletes: %s", got)
			}
			e.clk.Advance(3600)
			b, _ := e.eng.Bucket("default")
			// A paged index acknowledges what it wrote back: once its feed has
			// been quiet for a moment (feed.DefaultQuietDelay), so the purge
			// may need a few tries; the deadline only catches a hang.
			purged := 0
			for deadline := time.Now().Add(2 * time.Minute); purged < 10; time.Sleep(50 * time.Millisecond) {
				n, _, err := b.PurgeTombstones(ctx, e.clk.Now(), 100)
				if err != nil {
					t.Fatal(err)
				}
				purged += n
				if time.Now().After(deadline) {
					t.Fatalf("the metadata purge removed %d of 10 tombstones the index has caught up with", purged)
				}
			}
			if purged != 10 {
				t.Fatalf("the metadata purge removed %d tombstones, want 10", purged)
			}
		})
	}
}
