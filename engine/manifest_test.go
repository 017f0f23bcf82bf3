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

// A manifest edited apart from the bucket (as a cluster edits the one in
// its state) and applied to two buckets gives both the same collection
// IDs and UID, whatever collections either made before; a collection the
// applied manifest drops takes its documents; the manifest a bucket has
// changes nothing.
func TestApplyManifestGivesTheSameIDsEverywhere(t *testing.T) {
	ctx := context.Background()
	eng, err := engine.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	b1, err := eng.CreateBucket(ctx, engine.DefaultBucketSettings("b1"))
	if err != nil {
		t.Fatal(err)
	}
	b2, err := eng.CreateBucket(ctx, engine.DefaultBucketSettings("b2"))
	if err != nil {
		t.Fatal(err)
	}
	// b2 made a collection of its own first: its next ID is not b1's.
	if err := b2.CreateScope(ctx, "own"); err != nil {
		t.Fatal(err)
	}
	if _, err := b2.CreateCollection(ctx, "own", "x", 0); err != nil {
		t.Fatal(err)
	}

	m := b1.Manifest()
	if err := m.CreateScope("s"); err != nil {
		t.Fatal(err)
	}
	if err := m.CreateScope("s"); !errors.Is(err, engine.ErrScopeExists) {
		t.Fatalf("creating scope s twice: %v", err)
	}
	c1, err := m.CreateCollection("s", "c1", engine.CollectionSettings{MaxTTL: 60})
	if err != nil {
		t.Fatal(err)
	}
	c2, err := m.CreateCollection("s", "c2", engine.CollectionSettings{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.CreateCollection("nope", "c", engine.CollectionSettings{}); !errors.Is(err, engine.ErrScopeNotFound) {
		t.Fatalf("a collection of a missing scope: %v", err)
	}
	m.UID = max(m.UID, b2.ManifestUID()) + 1 // above both buckets'
	for _, b := range []*engine.Bucket{b1, b2} {
		if err := b.ApplyManifest(ctx, m); err != nil {
			t.Fatal(err)
		}
		if b.ManifestUID() != m.UID {
			t.Fatalf("%s: manifest UID %d, want %d", b.Name(), b.ManifestUID(), m.UID)
		}
		for _, want := range []engine.CollectionInfo{c1, c2} {
			c, err := b.Collection("s", want.Name)
			if err != nil || c.ID() != want.ID {
				t.Fatalf("%s: s.%s = %v, %v; want ID %d", b.Name(), want.Name, c, err, want.ID)
			}
		}
		if _, err := b.Collection("own", "x"); !errors.Is(err, engine.ErrScopeNotFound) {
			t.Fatalf("%s: own.x, which the manifest lacks: %v", b.Name(), err)
		}
	}

	// c1 gets a document on b2; a manifest without c1 drops it.
	c, err := b2.Collection("s", "c1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Upsert(ctx, "k", []byte(`1`), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := m.DropCollection("s", "c1"); err != nil {
		t.Fatal(err)
	}
	if err := b2.ApplyManifest(ctx, m); err != nil {
		t.Fatal(err)
	}
	if _, err := b2.Collection("s", "c1"); !errors.Is(err, engine.ErrCollectionNotFound) {
		t.Fatalf("s.c1 after the drop: %v", err)
	}
	// The same name again: a new ID, and not the dropped one's document.
	if _, err := m.CreateCollection("s", "c1", engine.CollectionSettings{}); err != nil {
		t.Fatal(err)
	}
	if err := b2.ApplyManifest(ctx, m); err != nil {
		t.Fatal(err)
	}
	again, err := b2.Collection("s", "c1")
	if err != nil || again.ID() == c1.ID {
		t.Fatalf("s.c1 created again: %v, %v; want a new ID (not %d)", again, err, c1.ID)
	}
	if _, err := again.Get(ctx, "k"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("the dropped collection's document in the new one: %v", err)
	}
	// The manifest it has changes nothing (the UID does not move).
	uid := b2.ManifestUID()
	if err := b2.ApplyManifest(ctx, m); err != nil {
		t.Fatal(err)
	}
	if c, err := b2.Collection("s", "c1"); err != nil || c.ID() != again.ID() || b2.ManifestUID() != uid {
		t.Fatalf("after the same manifest again: %v, %v, UID %d (was %d)", c, err, b2.ManifestUID(), uid)
	}
}
