package views

import (
	"context"
	"testing"

	"github.com/mayflydb/mayfly/index"
)

// TestBuildWritesBack: the catch-up that ends a build (enough documents
// applied behind the feed) leaves a paged index written back, its pages
// holding the build, before it returns, so that nothing is left for the
// quiet spell after it; a catch-up of a few changes leaves them held back
// (for the dirty budget or the quiet spell), as before, and the rows are
// right either way.
func TestBuildWritesBack(t *testing.T) {
	ctx := context.Background()
	b, svc := newInternalService(t, &Options{NoAutoUpdate: true, NoSync: true, BatchSize: 40, IndexCache: index.NewPageCache(8 << 20), buildQuietDocs: 100})
	upsertNumbered(t, b, 0, 300)
	if _, err := svc.PutDesignDoc(ctx, "default", "d", []byte(`{"views":{"v":{"map":"function(doc, meta){ emit(doc.n, 1); }","reduce":"_count"}}}`)); err != nil {
		t.Fatal(err)
	}
	ixs := svc.allIndexers()
	if len(ixs) != 1 {
		t.Fatalf("%d indexers", len(ixs))
	}
	ix := ixs[0]
	count := func() int {
		t.Helper()
		n, err := ix.idx.TotalRows("v")
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if err := ix.feed.CatchUpNow(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 300 {
		t.Fatalf("%d rows after the build, want 300", n)
	}
	if ix.idx.HeldBack() {
		t.Fatal("the build's catch-up left its changes held back, for the quiet spell")
	}
	upsertNumbered(t, b, 300, 310)
	if err := ix.feed.CatchUpNow(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 310 {
		t.Fatalf("%d rows after 10 more, want 310", n)
	}
	if !ix.idx.HeldBack() {
		t.Fatal("a catch-up of 10 changes wrote back at once")
	}
}
