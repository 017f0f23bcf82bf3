package views_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/views"
)

// TestReplaceKeepsIndexLeftAtStagingPath: a replacement whose move into
// place fails (the rename of its file, injected) leaves the new index
// running at the staging path, where the next replacement builds. That
// replacement must not take the running index's file: the running index
// first moves into place, or the replacement fails and takes nothing.
// When the replacement fails later (its design document cannot be
// stored), the running index goes on as it was and reopens after a restart
// as it is, without a rebuild. On the old code the next replacement
// unlinked the running index's file: after a restart its rows were gone.
// Both index modes.
func TestReplaceKeepsIndexLeftAtStagingPath(t *testing.T) {
	for _, mode := range indexModes {
		t.Run(mode.name, func(t *testing.T) {
			opts := mode.opts()
			opts.NoAutoUpdate = true // after the restart, only stale=false builds
			e := newEnv(t, opts)
			ctx := context.Background()
			const n = 300
			e.loadDocs(n)
			ddoc := func(r int) []byte {
				return []byte(fmt.Sprintf(`{"views":{"v":{"map":"function (doc, meta) { emit(doc.n, %d); }"}}}`, r))
			}
			// answer checks that version r's index answers all n rows.
			answer := func(stale string, r int) {
				t.Helper()
				got := e.query("d", "v", "stale="+stale+"&limit=1")
				if want := fmt.Sprintf(`{"total_rows":%d,"rows":[{"id":"k000000","key":0,"value":%d}]}`, n, r); got != want {
					t.Fatalf("stale=%s answers %s, want version %d's whole index: %s", stale, got, r, want)
				}
			}
			if _, err := e.svc.PutDesignDoc(ctx, "default", "d", ddoc(1)); err != nil {
				t.Fatal(err)
			}
			answer("false", 1)

			failed := errors.New("injected rename failure")
			views.SetRenameHook(e.svc, func(string, string) error { return failed })
			if _, err := e.svc.PutDesignDoc(ctx, "default", "d", ddoc(2)); err != nil {
				t.Fatalf("a replacement whose move into place failed: %v (the move's failure is only logged)", err)
			}
			answer("false", 2) // from the staging path
			b, err := e.eng.Bucket("default")
			if err != nil {
				t.Fatal(err)
			}
			staged := views.IndexPath(b, "_design/d") + ".next"
			if _, err := os.Stat(staged); err != nil {
				t.Fatalf("the running index is not at the staging path: %v", err)
			}

			// The next replacement cannot move it into place either: it
			// fails, and takes nothing.
			if _, err := e.svc.PutDesignDoc(ctx, "default", "d", ddoc(3)); !errors.Is(err, failed) {
				t.Fatalf("a replacement that could not move the running index into place: %v, want the rename's failure", err)
			}
			answer("ok", 2)

			// Now the move succeeds, but storing the design document fails:
			// the running index must keep its file.
			views.SetRenameHook(e.svc, nil)
			storeFailed := errors.New("injected store failure")
			views.SetStoreHook(e.svc, func() error { return storeFailed })
			if _, err := e.svc.PutDesignDoc(ctx, "default", "d", ddoc(4)); !errors.Is(err, storeFailed) {
				t.Fatalf("a replacement whose design document could not be stored: %v", err)
			}
			views.SetStoreHook(e.svc, nil)
			answer("ok", 2)
			if _, err := os.Stat(staged); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("a file is left at the staging path: %v", err)
			}

			e.close()
			e.open()
			answer("ok", 2) // no rebuild: stale=ok reads the file as it was
			if m := e.mapped("d"); m != 0 {
				t.Fatalf("%d documents mapped after the restart: the index was rebuilt", m)
			}
			d, err := e.svc.DesignDoc(ctx, "default", "d")
			if err != nil || !strings.Contains(string(d.Body), "emit(doc.n, 2)") {
				t.Fatalf("the stored design document after the restart: %v %s", err, d.Body)
			}
			// A later replacement works as usual.
			if _, err := e.svc.PutDesignDoc(ctx, "default", "d", ddoc(5)); err != nil {
				t.Fatal(err)
			}
			answer("false", 5)
		})
	}
}
