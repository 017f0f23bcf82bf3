package views_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/index"
	"github.com/mayflydb/mayfly/views"
)

// A running view index follows the drop of a partition's copy (issue 22):
// the partition's rows leave it at once (total_rows and the reduction with
// them), and when a copy of the partition joins the node again, its
// documents come back from sequence number 0 (plain writes here; a
// snapshot restore writes the same way) and the index holds exactly them,
// though their sequence numbers are below where the index was in the
// partition before the drop (it skipped them). Throughout, it answers as a
// fresh index of the bucket would (views.Check), and after a restart it
// is taken as it is, not rebuilt.
func TestDroppedPartitionLeavesRunningIndex(t *testing.T) {
	t.Run("in memory", func(t *testing.T) { testDroppedPartition(t, views.Options{}) })
	t.Run("paged", func(t *testing.T) { testDroppedPartition(t, views.Options{IndexCache: index.NewPageCache(1)}) })
}

func testDroppedPartition(t *testing.T, opts views.Options) {
	ctx := context.Background()
	e := newEnv(t, opts)
	if _, err := e.svc.PutDesignDoc(ctx, "default", "d", []byte(`{"views":{"n":{"map":"function (doc, meta) { emit(meta.id, doc.n); }","reduce":"_sum"}}}`)); err != nil {
		t.Fatal(err)
	}
	b, err := e.eng.Bucket("default")
	if err != nil {
		t.Fatal(err)
	}
	const n = 64
	key := func(i int) string { return fmt.Sprintf("k%02d", i) }
	for range 4 { // several changes per document: high sequence numbers
		for i := range n {
			e.put(key(i), fmt.Sprintf(`{"n":%d}`, i))
		}
	}
	part := b.PartitionOf(key(0))
	var in []int
	sumOut, out := 0, 0
	for i := range n {
		if b.PartitionOf(key(i)) == part {
			in = append(in, i)
		} else {
			sumOut += i
			out++
		}
	}
	if len(in) < 3 {
		t.Fatalf("%d keys in partition %d; the test needs 3", len(in), part)
	}
	sumAll := n * (n - 1) / 2
	if got, want := e.query("d", "n", "stale=false"), fmt.Sprintf(`{"rows":[{"key":null,"value":%d}]}`, sumAll); got != want {
		t.Fatalf("before the drop: %s, want %s", got, want)
	}
	before := e.mapped("d")
	if err := b.DropPartition(ctx, part); err != nil {
		t.Fatal(err)
	}
	if got, want := e.query("d", "n", "stale=false"), fmt.Sprintf(`{"rows":[{"key":null,"value":%d}]}`, sumOut); got != want {
		t.Errorf("after the drop: %s, want %s", got, want)
	}
	if got, want := e.query("d", "n", "stale=false&reduce=false&limit=0"), fmt.Sprintf(`{"total_rows":%d,"rows":[]}`, out); got != want {
		t.Errorf("after the drop: %s, want %s", got, want)
	}
	if got := e.query("d", "n", fmt.Sprintf(`stale=ok&reduce=false&key="%s"`, key(in[0]))); !strings.Contains(got, `"rows":[]`) {
		t.Errorf("a row of the dropped partition: %s", got)
	}
	if err := e.svc.Check(ctx); err != nil {
		t.Errorf("after the drop: %v", err)
	}

	// The copy joins again: two of its documents, at sequence numbers 1 and 2.
	e.put(key(in[1]), `{"n":1000}`)
	e.put(key(in[2]), `{"n":2000}`)
	want := fmt.Sprintf(`{"rows":[{"key":null,"value":%d}]}`, sumOut+3000)
	if got := e.query("d", "n", "stale=false"); got != want {
		t.Errorf("after the copy joined again: %s, want %s", got, want)
	}
	wantRows := fmt.Sprintf(`{"total_rows":%d,"rows":[{"id":"%s","key":"%s","value":1000}]}`, out+2, key(in[1]), key(in[1]))
	if got := e.query("d", "n", fmt.Sprintf(`stale=ok&reduce=false&key="%s"`, key(in[1]))); got != wantRows {
		t.Errorf("a document of the copy joined again: %s, want %s", got, wantRows)
	}
	if got := e.query("d", "n", fmt.Sprintf(`stale=ok&reduce=false&key="%s"`, key(in[0]))); !strings.Contains(got, `"rows":[]`) {
		t.Errorf("a document the copy no longer holds: %s", got)
	}
	if err := e.svc.Check(ctx); err != nil {
		t.Errorf("after the copy joined again: %v", err)
	}
	inf, err := e.svc.Info(ctx, "default", "d")
	if err != nil {
		t.Fatal(err)
	}
	if mapped := inf.MappedSinceStart - before; inf.Rollbacks != 0 || mapped != 2 {
		t.Errorf("rollbacks %d, documents mapped since the drop %d; want 0, 2 (nothing rebuilt)", inf.Rollbacks, mapped)
	}

	// A restart takes the index as it is.
	e.close()
	e.open()
	if got := e.query("d", "n", "stale=false"); got != want {
		t.Errorf("after a restart: %s, want %s", got, want)
	}
	if inf, err := e.svc.Info(ctx, "default", "d"); err != nil || inf.Rollbacks != 0 || inf.MappedSinceStart != 0 {
		t.Errorf("after a restart: %+v, %v; want no rollback, nothing mapped", inf, err)
	}
}

// A copy of a partition dropped while the index runs and then restored
// from its group's snapshot (how a copy that joins a group again gets its
// documents: their own sequence numbers, some below where the index was in
// the partition) is indexed exactly: the snapshot's documents, not one
// deleted meanwhile whose tombstone was purged (the old code kept its row:
// the feed never brings its deletion), as a fresh index would (views.Check).
func TestDroppedPartitionRestoredFromSnapshot(t *testing.T) {
	ctx := context.Background()
	e, replica, leader, lclk, group := newReplicatedEnv(t)
	if _, err := e.svc.PutDesignDoc(ctx, "default", "d", []byte(`{"views":{"n":{"map":"function (doc, meta) { emit(meta.id, doc.n); }","reduce":"_sum"}}}`)); err != nil {
		t.Fatal(err)
	}
	const part = 5
	var keys []string
	for i := 0; len(keys) < 6; i++ {
		if k := fmt.Sprint("k", i); leader.PartitionOf(k) == part {
			keys = append(keys, k)
		}
	}
	lc := leader.DefaultCollection()
	for round := range 3 {
		for i, k := range keys {
			if _, err := lc.Upsert(ctx, k, fmt.Appendf(nil, `{"n":%d}`, 10*round+i), nil); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := lc.Upsert(ctx, fmt.Sprint("other", round), []byte(`{"n":100}`), nil); err != nil {
			t.Fatal(err)
		}
	}
	if got := e.query("d", "n", "stale=false&reduce=false&limit=0"); got != `{"total_rows":9,"rows":[]}` {
		t.Fatalf("the replica's index before: %s", got)
	}

	// The replica's copy moves away and is dropped; the group goes on.
	group.mu.Lock()
	group.to = group.to[:1]
	group.mu.Unlock()
	if err := replica.DropPartition(ctx, part); err != nil {
		t.Fatal(err)
	}
	if got := e.query("d", "n", "stale=false"); got != `{"rows":[{"key":null,"value":300}]}` {
		t.Errorf("after the drop: %s", got)
	}
	if _, err := lc.Delete(ctx, keys[0], nil); err != nil {
		t.Fatal(err)
	}
	if _, err := lc.Upsert(ctx, keys[1], []byte(`{"n":1000}`), nil); err != nil {
		t.Fatal(err)
	}
	// The deletion's tombstone is purged before the copy joins again: only
	// the snapshot's lack of keys[0] says it is gone.
	// A copy joins again: the group's snapshot.
	purgeAndRestore(t, leader, replica, lclk, part)
	// keys[1..5] at 1000, 22, 23, 24, 25; the other partitions' 300.
	if got, want := e.query("d", "n", "stale=false"), `{"rows":[{"key":null,"value":1394}]}`; got != want {
		t.Errorf("after the restore: %s, want %s", got, want)
	}
	if got := e.query("d", "n", "stale=ok&reduce=false&limit=0"); got != `{"total_rows":8,"rows":[]}` {
		t.Errorf("after the restore: %s", got)
	}
	if err := e.svc.Check(ctx); err != nil {
		t.Error(err)
	}
}
