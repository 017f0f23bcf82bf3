package views_test

import (
	"context"
	"errors"
	"testing"

	"github.com/mayflydb/mayfly/views"
)

// A design document's name must be UTF-8: PutDesignDoc and CheckDesignDoc
// (a cluster node's check before it stores a definition) refuse one sent as
// other bytes with ErrNameNotUTF8, and store nothing. One stored before the
// check (here through PutDesignDocVersion, which stores what a cluster
// already holds) stays listed, queryable and deletable after a restart. A
// review found the name was taken, and /metrics then failed on it.
func TestDesignDocNameNotUTF8(t *testing.T) {
	e := newEnv(t, views.Options{})
	ctx := context.Background()
	body := []byte(`{"views":{"v":{"map":"function (doc, meta) { emit(meta.id, null); }"}}}`)
	if _, err := e.svc.PutDesignDoc(ctx, "default", "x\xffy", body); !errors.Is(err, views.ErrNameNotUTF8) {
		t.Fatalf("PutDesignDoc of x\\xffy: %v, want ErrNameNotUTF8", err)
	}
	if err := e.svc.CheckDesignDoc(ctx, "default", "x\xffy", body); !errors.Is(err, views.ErrNameNotUTF8) {
		t.Fatalf("CheckDesignDoc of x\\xffy: %v, want ErrNameNotUTF8", err)
	}
	if _, err := e.svc.DesignDoc(ctx, "default", "x\xffy"); !errors.Is(err, views.ErrNotFound) {
		t.Fatalf("the refused design document: %v, want ErrNotFound", err)
	}
	if _, err := e.svc.PutDesignDoc(ctx, "default", "x\u00ffy", body); err != nil {
		t.Fatalf("PutDesignDoc of a UTF-8 name outside ASCII: %v", err)
	}

	if _, err := e.svc.PutDesignDocVersion(ctx, "default", "old\xff", body, 1); err != nil {
		t.Fatalf("PutDesignDocVersion of old\\xff: %v", err)
	}
	e.close()
	e.open()
	ds, err := e.svc.DesignDocs(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, d := range ds {
		found = found || d.ID == views.DesignDocPrefix+"old\xff"
	}
	if !found {
		t.Fatalf("after a restart, the design document stored as old\\xff is not listed: %d listed", len(ds))
	}
	if _, err := e.svc.Info(ctx, "default", "old\xff"); err != nil {
		t.Fatalf("Info of old\\xff: %v", err)
	}
	if err := e.svc.DeleteDesignDoc(ctx, "default", "old\xff"); err != nil {
		t.Fatalf("DeleteDesignDoc of old\\xff: %v", err)
	}
}
