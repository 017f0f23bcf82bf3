package engine_test

import (
	"context"
	"errors"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// The manifest UID grows with each change of the scopes and collections,
// and a collection is found by its ID until it is dropped.
func TestManifestUIDAndCollectionByID(t *testing.T) {
	ctx := context.Background()
	eng, err := engine.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	b, err := eng.CreateBucket(ctx, engine.DefaultBucketSettings("b"))
	if err != nil {
		t.Fatal(err)
	}
	m0 := b.ManifestUID()
	if err := b.CreateScope(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	m1 := b.ManifestUID()
	ci, err := b.CreateCollection(ctx, "s", "c", 60)
	if err != nil {
		t.Fatal(err)
	}
	m2 := b.ManifestUID()
	if !(m0 < m1 && m1 < m2) {
		t.Fatalf("manifest UIDs %d, %d, %d: want growing", m0, m1, m2)
	}
	c, scope, name, err := b.CollectionByID(ci.ID)
	if err != nil || scope != "s" || name != "c" || c.ID() != ci.ID {
		t.Fatalf("CollectionByID(%d) = %v, %q, %q, %v", ci.ID, c, scope, name, err)
	}
	if _, _, _, err := b.CollectionByID(engine.DefaultCollectionID); err != nil {
		t.Fatalf("default collection: %v", err)
	}
	if err := b.DropCollection(ctx, "s", "c"); err != nil {
		t.Fatal(err)
	}
	if b.ManifestUID() <= m2 {
		t.Fatalf("manifest UID %d after a drop: want above %d", b.ManifestUID(), m2)
	}
	if _, _, _, err := b.CollectionByID(ci.ID); !errors.Is(err, engine.ErrCollectionNotFound) {
		t.Fatalf("dropped collection: err %v, want ErrCollectionNotFound", err)
	}
}
