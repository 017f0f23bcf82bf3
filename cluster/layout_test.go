package cluster

import (
	"context"
	"fmt"
	"slices"
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
	if err := DefineBucket(ctx, cli, BucketDef{BucketSettings: engine.DefaultBucketSettings("b")}); err != nil {
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

	// Layout: the map, the recorded leaders and the rev, read at once.
	m, _, err := ReadMap(ctx, cli, "b")
	if err != nil {
		t.Fatal(err)
	}
	l := mirror.Layout("b", m.UUID)
	if l.Map == nil || len(l.Leaders) != len(m.Partitions) || slices.ContainsFunc(l.Leaders, func(s string) bool { return s != "" }) ||
		l.Rev != max(bumped, mirror.NodesRevision()) || len(l.Nodes) == 0 {
		t.Fatalf("before any record: layout %+v; want the map, %d partitions none recorded, rev %d, the nodes", l, len(m.Partitions), max(bumped, mirror.NodesRevision()))
	}
	led, err := PublishLeads(ctx, cli, "b", m.UUID, "n1", []int{1})
	if err != nil {
		t.Fatal(err)
	}
	until("the record", func(rev int64) bool { return rev >= led })
	if l := mirror.Layout("b", m.UUID); l.Rev != led || l.Leaders[1] != "n1" || l.Leaders[0] != "" {
		t.Fatalf("after n1's record of partition 1 at %d: rev %d, leaders %q", led, l.Rev, l.Leaders)
	}
	if l := mirror.Layout("other", m.UUID); l.Map != nil || l.Leaders != nil {
		t.Fatalf("a bucket without a map: layout %+v", l)
	}
}

// A node holding no copy of a partition learns its leader from the
// leaders' records (PublishLeads): each record moves the bucket's layout
// revision in the same write, the latest record naming a partition wins
// (a new leader's over a dead one's it replaced), a record of another
// incarnation of the bucket names nothing, and a node's newer record
// without the partition withdraws it.
func TestClaimedLeaders(t *testing.T) {
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
	// publish writes a record and waits for the mirror to hold the
	// layout revision it moved to, checking it moved.
	publish := func(bucket, uuid, node string, led ...int) {
		t.Helper()
		before := mirror.LayoutRevision(bucket)
		rev, err := PublishLeads(ctx, cli, bucket, uuid, node, led)
		if err != nil || rev <= before {
			t.Fatalf("PublishLeads by %s: revision %d (%v), %d before", node, rev, err, before)
		}
		for {
			ch := mirror.Changed()
			if got := mirror.LayoutRevision(bucket); got == rev {
				return
			} else if got > rev {
				t.Fatalf("the mirror's layout revision of %s: %d, past %d", bucket, got, rev)
			}
			select {
			case <-ch:
			case <-ctx.Done():
				t.Fatalf("the mirror did not reach the layout revision %d of %s", rev, bucket)
			}
		}
	}
	want := func(what string, uuid string, w ...string) {
		t.Helper()
		if got := mirror.ClaimedLeaders("b", uuid, len(w)); !slices.Equal(got, w) {
			t.Fatalf("%s: claimed leaders %q; want %q", what, got, w)
		}
		for p, wp := range w {
			if got := mirror.ClaimedLeader("b", uuid, p); got != wp {
				t.Fatalf("%s: claimed leader of partition %d %q; want %q", what, p, got, wp)
			}
		}
	}
	want("no record", "u1", "", "", "", "", "", "", "", "", "", "")
	publish("b", "u1", "n2", 0, 2, 9)
	publish("b", "u1", "n3", 1, 2)
	want("n3's record after n2's", "u1", "n2", "n3", "n3", "", "", "", "", "", "", "n2")
	want("another incarnation", "u2", "", "", "", "", "", "", "", "", "", "")
	publish("b", "u2", "n4", 2)
	want("a record of another incarnation", "u1", "n2", "n3", "n3", "", "", "", "", "", "", "n2")
	want("the other incarnation's own", "u2", "", "", "n4", "", "", "", "", "", "", "")
	publish("b", "u1", "n3", 1)
	want("n3 no longer leading 2", "u1", "n2", "n3", "n2", "", "", "", "", "", "", "n2")
	publish("other", "u1", "n5", 0)
	want("another bucket's record", "u1", "n2", "n3", "n2", "", "", "", "", "", "", "n2")

	// A mirror started afresh reads the records whole.
	fresh := NewTopologyMirror(cli)
	wg.Go(func() { fresh.Run(mctx) })
	if err := fresh.WaitLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	if got, w := fresh.ClaimedLeaders("b", "u1", 3), []string{"n2", "n3", "n2"}; !slices.Equal(got, w) {
		t.Fatalf("a fresh mirror's claimed leaders %q; want %q", got, w)
	}
	if got, w := fresh.LayoutRevision("b"), mirror.LayoutRevision("b"); got != w {
		t.Fatalf("a fresh mirror's layout revision %d; the other's %d", got, w)
	}
}
