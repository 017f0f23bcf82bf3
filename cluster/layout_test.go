package cluster

import (
	"context"
	"fmt"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// The layout revision every node reads grows with each recorded
// leadership change and with a new map, and a node reads what another
// recorded.
func TestLayoutRevision(t *testing.T) {
	ctx := context.Background()
	nodes := startAll(t, ctx, []Config{testConfig(t, testPeers(t, 1), "n1", t.TempDir(), &syncLog{})})
	defer closeAll(nodes)
	cli := nodes[0].Client()
	if rev, err := LayoutRevision(ctx, cli, "b"); err != nil || rev != 0 {
		t.Fatalf("a bucket without a map: revision %d, %v", rev, err)
	}
	if err := DefineBucket(ctx, cli, BucketDef{BucketSettings: engine.DefaultBucketSettings("b"), ReplicaNumber: 2}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the bucket placed", func() (bool, string) {
		m, _, err := ReadMap(ctx, cli, "b")
		return err == nil && m != nil, fmt.Sprint(err)
	})
	placed, err := LayoutRevision(ctx, cli, "b")
	if err != nil || placed == 0 {
		t.Fatalf("after the map was placed: revision %d, %v", placed, err)
	}
	bumped, err := BumpLayout(ctx, cli, "b", "n2")
	if err != nil || bumped <= placed {
		t.Fatalf("a recorded leadership change: revision %d (%v), %d before", bumped, err, placed)
	}
	if rev, err := LayoutRevision(ctx, cli, "b"); err != nil || rev != bumped {
		t.Fatalf("read %d (%v) after the change recorded at %d", rev, err, bumped)
	}
	if rev, err := LayoutRevision(ctx, cli, "other"); err != nil || rev != 0 {
		t.Fatalf("another bucket: revision %d, %v", rev, err)
	}
}
