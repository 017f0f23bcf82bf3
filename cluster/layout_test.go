package cluster

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
)

// The layout revision a node's mirror holds grows with each recorded
// leadership change and with a new map, a node sees what another
// recorded, and the mirror tells its waiters of the change.
func TestLayoutRevision(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nodes := startAll(t, ctx, []Config{testConfig(t, testPeers(t, 1), "n1", t.TempDir(), &syncLog{})})
	defer closeAll(nodes)
	cli := nodes[0].Client()
	mirror := NewTopologyMirror(cli)
	mctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { mirror.Run(mctx) })
	defer func() { stop(); wg.Wait() }()
	if err := mirror.WaitLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	// until waits, change after change, for the mirror's layout revision
	// of b to be want.
	until := func(what string, want func(int64) bool) int64 {
		t.Helper()
		for {
			ch := mirror.Changed()
			if rev := mirror.LayoutRevision("b"); want(rev) {
				return rev
			}
			select {
			case <-ch:
			case <-ctx.Done():
				t.Fatalf("%s: the mirror's layout revision of b is %d", what, mirror.LayoutRevision("b"))
			}
		}
	}
	if rev := mirror.LayoutRevision("b"); rev != 0 {
		t.Fatalf("a bucket without a map: revision %d", rev)
	}
	if err := DefineBucket(ctx, cli, BucketDef{BucketSettings: engine.DefaultBucketSettings("b"), ReplicaNumber: 2}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the bucket placed", func() (bool, string) {
		m, _, err := ReadMap(ctx, cli, "b")
		return err == nil && m != nil, fmt.Sprint(err)
	})
	_, mapRev, err := ReadMap(ctx, cli, "b")
	if err != nil {
		t.Fatal(err)
	}
	placed := until("the map placed", func(rev int64) bool { return rev >= mapRev })
	if placed != mapRev {
		t.Fatalf("after the map was placed at %d: revision %d", mapRev, placed)
	}
	bumped, err := BumpLayout(ctx, cli, "b", "n2")
	if err != nil || bumped <= placed {
		t.Fatalf("a recorded leadership change: revision %d (%v), %d before", bumped, err, placed)
	}
	if rev := until("the change recorded", func(rev int64) bool { return rev != placed }); rev != bumped {
		t.Fatalf("the mirror holds %d after the change recorded at %d", rev, bumped)
	}
	if rev := mirror.LayoutRevision("other"); rev != 0 {
		t.Fatalf("another bucket: revision %d", rev)
	}
}
