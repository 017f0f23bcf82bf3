package cluster

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestDefinitionsVersionedMirroredAndDeleted: a design document's
// versions count on through deletes (as a single node's revisions do),
// concurrent writers each get a version of their own, and a mirror sees
// every write in etcd's order, a deleted search definition gone.
func TestDefinitionsVersionedMirroredAndDeleted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nodes := startAll(t, ctx, []Config{testConfig(t, testPeers(t, 1), "n1", t.TempDir(), &syncLog{})})
	defer closeAll(nodes)
	cli := nodes[0].Client()

	ddocs, sdefs := NewDefMirror(cli, DesignDocs), NewDefMirror(cli, SearchDefs)
	mctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	changed := make(chan string, 100)
	wg.Go(func() {
		ddocs.Run(mctx, func(b string) {
			select {
			case changed <- b:
			default:
			}
		})
	})
	wg.Go(func() { sdefs.Run(mctx, func(string) {}) })
	defer func() { stop(); wg.Wait() }()

	entry := func(bucket, name string) DesignDocDef {
		t.Helper()
		for _, d := range ddocs.Bucket(bucket) {
			if d.Name == name {
				def, err := ParseDesignDocDef(d.Value)
				if err != nil {
					t.Fatal(err)
				}
				return def
			}
		}
		t.Fatalf("the mirror holds no %s/%s", bucket, name)
		return DesignDocDef{}
	}

	v, rev, err := PutDesignDoc(ctx, cli, "b", "dd", []byte(`{"views":{}}`))
	if err != nil || v != 1 {
		t.Fatalf("first put: version %d, %v; want 1", v, err)
	}
	if err := ddocs.WaitRevision(ctx, rev); err != nil {
		t.Fatal(err)
	}
	if d := entry("b", "dd"); d.Version != 1 || string(d.Body) != `{"views":{}}` || d.Deleted {
		t.Fatalf("mirror after the first put: %+v", d)
	}
	if v, _, err = PutDesignDoc(ctx, cli, "b", "dd", []byte(`{"views":{"v":{"map":"function(d){}"}}}`)); err != nil || v != 2 {
		t.Fatalf("second put: version %d, %v; want 2", v, err)
	}
	if rev, err = DeleteDesignDoc(ctx, cli, "b", "dd"); err != nil {
		t.Fatal(err)
	}
	if err := ddocs.WaitRevision(ctx, rev); err != nil {
		t.Fatal(err)
	}
	if d := entry("b", "dd"); d.Version != 3 || !d.Deleted || d.Body != nil {
		t.Fatalf("mirror after the delete: %+v, want version 3 deleted", d)
	}
	if _, err := DeleteDesignDoc(ctx, cli, "b", "dd"); !errors.Is(err, ErrDefNotFound) {
		t.Fatalf("deleting a deleted design document: %v, want ErrDefNotFound", err)
	}
	if _, err := DeleteDesignDoc(ctx, cli, "b", "never"); !errors.Is(err, ErrDefNotFound) {
		t.Fatalf("deleting a design document never stored: %v, want ErrDefNotFound", err)
	}
	if v, _, err = PutDesignDoc(ctx, cli, "b", "dd", []byte(`{}`)); err != nil || v != 4 {
		t.Fatalf("put after the delete: version %d, %v; want 4 (counting on)", v, err)
	}

	// Eight writers at once: eight distinct versions, the last written
	// the one the mirror holds.
	var mu sync.Mutex
	var got []uint64
	var last int64
	var writers sync.WaitGroup
	for range 8 {
		writers.Go(func() {
			v, rev, err := PutDesignDoc(ctx, cli, "b", "race", []byte(`{}`))
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			got = append(got, v)
			last = max(last, rev)
			mu.Unlock()
		})
	}
	writers.Wait()
	slices.Sort(got)
	if !slices.Equal(got, []uint64{1, 2, 3, 4, 5, 6, 7, 8}) {
		t.Fatalf("concurrent versions %v, want 1..8 once each", got)
	}
	if err := ddocs.WaitRevision(ctx, last); err != nil {
		t.Fatal(err)
	}
	if d := entry("b", "race"); d.Version != 8 {
		t.Fatalf("the mirror holds version %d, want the last, 8", d.Version)
	}
	select {
	case b := <-changed:
		if b != "" && b != "b" {
			t.Fatalf("changed(%q), want b (or all)", b)
		}
	default:
		t.Fatal("the mirror's changes were not reported")
	}

	// Search definitions: put, replaced, deleted. (A bucket's definitions
	// deleted whole with it: TestBucketIncarnationsInClusterState.)
	if _, err := PutSearchDef(ctx, cli, "b", "idx", []byte(`{"uuid":"1"}`)); err != nil {
		t.Fatal(err)
	}
	if rev, err = PutSearchDef(ctx, cli, "b", "idx", []byte(`{"uuid":"2"}`)); err != nil {
		t.Fatal(err)
	}
	if err := sdefs.WaitRevision(ctx, rev); err != nil {
		t.Fatal(err)
	}
	if ds := sdefs.Bucket("b"); len(ds) != 1 || ds[0].Name != "idx" || string(ds[0].Value) != `{"uuid":"2"}` || ds[0].ModRevision != rev {
		t.Fatalf("search mirror %+v, want idx at uuid 2, revision %d", ds, rev)
	}
	if rev, err = DeleteSearchDef(ctx, cli, "b", "idx"); err != nil {
		t.Fatal(err)
	}
	if _, err := DeleteSearchDef(ctx, cli, "b", "idx"); !errors.Is(err, ErrDefNotFound) {
		t.Fatalf("deleting it again: %v, want ErrDefNotFound", err)
	}
	if err := sdefs.WaitRevision(ctx, rev); err != nil {
		t.Fatal(err)
	}
	if ds := sdefs.Bucket("b"); len(ds) != 0 {
		t.Fatalf("search mirror after the delete: %+v", ds)
	}
	if rev, err = PutSearchDef(ctx, cli, "other", "x", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}

	// A mirror started later reads what etcd holds.
	late := NewDefMirror(cli, SearchDefs)
	lctx, lstop := context.WithCancel(ctx)
	defer lstop()
	go late.Run(lctx, func(string) {})
	if err := late.WaitRevision(ctx, rev); err != nil {
		t.Fatal(err)
	}
	if got := late.Buckets(); !slices.Equal(got, []string{"other"}) {
		t.Fatalf("a late mirror's buckets %v, want [other]", got)
	}
}
