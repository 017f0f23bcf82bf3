package engine_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// logReplicator is a replication group per partition in one process: a
// proposed entry gets the next log index (with a gap of one every third
// entry, as a Raft log's leader entries make) and is applied to every
// replica in log order; the proposer gets its own replica's result. It is
// the contract replica.Host gives the engine, without the network.
type logReplicator struct {
	mu       sync.Mutex
	replicas []*engine.Bucket
	leader   int
	refuse   bool  // this node does not lead: every write is refused
	fail     error // if set, every proposal fails with it (after Writable passes)
	// failPart, if set, makes the proposals to its partitions fail with
	// their error, as fail does every proposal.
	failPart map[int]error
	// beforeApply, if set, runs once, before the next entry is given its
	// index: a write racing the proposed one.
	beforeApply func()
	next        map[int]uint64
	log         map[int][]logEntry
}

type logEntry struct {
	index uint64
	data  []byte
}

func (l *logReplicator) Writable(_ context.Context, part int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.refuse {
		return fmt.Errorf("%w: partition %d is led elsewhere", engine.ErrNotMyVBucket, part)
	}
	return nil
}

func (l *logReplicator) Replicate(_ context.Context, part int, entry []byte) (engine.ReplicatedResult, error) {
	l.mu.Lock()
	race := l.beforeApply
	l.beforeApply = nil
	l.mu.Unlock()
	if race != nil {
		race()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.refuse {
		return engine.ReplicatedResult{}, fmt.Errorf("%w: partition %d is led elsewhere", engine.ErrNotMyVBucket, part)
	}
	if l.fail != nil {
		return engine.ReplicatedResult{}, l.fail
	}
	if err := l.failPart[part]; err != nil {
		return engine.ReplicatedResult{}, err
	}
	if l.next == nil {
		l.next, l.log = map[int]uint64{}, map[int][]logEntry{}
	}
	idx := l.next[part] + 1
	if idx%3 == 0 {
		idx++ // a gap: the index of an entry that is no write
	}
	l.next[part] = idx
	l.log[part] = append(l.log[part], logEntry{idx, append([]byte(nil), entry...)})
	var mine engine.ReplicatedResult
	for i, b := range l.replicas {
		res, err := b.ApplyReplicated(part, idx, entry)
		if err != nil {
			return engine.ReplicatedResult{}, err
		}
		if i == l.leader {
			mine = res
		}
	}
	return mine, nil
}

// replicas opens n buckets, each in its own engine, the first one
// replicating its writes to all of them.
func replicas(t *testing.T, n int) ([]*engine.Bucket, *logReplicator, *engine.FakeClock) {
	t.Helper()
	bs, r, clks := replicaClocks(t, n)
	return bs, r, clks[0]
}

// replicaClocks is replicas, returning each replica's clock.
func replicaClocks(t *testing.T, n int) ([]*engine.Bucket, *logReplicator, []*engine.FakeClock) {
	t.Helper()
	return replicaBuckets(t, n, engine.BucketSettings{Name: "b", Type: engine.Couchbase})
}

// replicaBuckets is replicaClocks for buckets of settings s.
func replicaBuckets(t *testing.T, n int, s engine.BucketSettings) ([]*engine.Bucket, *logReplicator, []*engine.FakeClock) {
	t.Helper()
	var bs []*engine.Bucket
	var clks []*engine.FakeClock
	for range n {
		eng, c := newEngine(t, t.TempDir())
		clks = append(clks, c)
		b, err := eng.CreateBucket(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		bs = append(bs, b)
	}
	r := &logReplicator{replicas: bs}
	bs[0].SetReplicator(r)
	return bs, r, clks
}

// sameEverywhere checks that every replica reads key as the first does.
func sameEverywhere(t *testing.T, bs []*engine.Bucket, key string) *engine.Document {
	t.Helper()
	ctx := context.Background()
	want, werr := bs[0].DefaultCollection().Get(ctx, key)
	for i, b := range bs[1:] {
		got, err := b.DefaultCollection().Get(ctx, key)
		if (err == nil) != (werr == nil) {
			t.Fatalf("%q: replica %d err %v, leader %v", key, i+1, err, werr)
		}
		if err != nil {
			continue
		}
		if got.CAS != want.CAS || got.Seq != want.Seq || got.RevSeq != want.RevSeq || string(got.Value) != string(want.Value) ||
			got.Flags != want.Flags || got.Expiration != want.Expiration {
			t.Fatalf("%q: replica %d has %+v, leader %+v", key, i+1, got, want)
		}
	}
	return want
}

// Writes through a Replicator reach every replica with the same CAS,
// revision and sequence number (the log index); the write's answer is the
// version applied; insert on an existing key, a CAS mismatch and a delete
// of a missing key fail as on one node, and change nothing anywhere.
func TestReplicatedWritesSameOnEveryReplica(t *testing.T) {
	ctx := context.Background()
	bs, r, clk := replicas(t, 3)
	c := bs[0].DefaultCollection()
	d, err := c.Upsert(ctx, "a", []byte(`{"v":1}`), &engine.WriteOptions{Flags: 7})
	if err != nil {
		t.Fatal(err)
	}
	part := int(d.Partition)
	if last := r.log[part][len(r.log[part])-1].index; d.Seq != last {
		t.Fatalf("sequence number %d, want the log index %d", d.Seq, last)
	}
	if got := sameEverywhere(t, bs, "a"); got.CAS != d.CAS || got.Flags != 7 {
		t.Fatalf("read %+v, write answered %+v", got, d)
	}
	if _, err := c.Insert(ctx, "a", []byte(`{}`), nil); !errors.Is(err, engine.ErrKeyExists) {
		t.Fatalf("insert on an existing key: %v", err)
	}
	if _, err := c.Replace(ctx, "a", []byte(`{"v":2}`), &engine.WriteOptions{CAS: d.CAS + 1}); !errors.Is(err, engine.ErrCASMismatch) {
		t.Fatalf("replace with a wrong CAS: %v", err)
	}
	d2, err := c.Replace(ctx, "a", []byte(`{"v":2}`), &engine.WriteOptions{CAS: d.CAS, Expiry: 100})
	if err != nil {
		t.Fatal(err)
	}
	if d2.CAS <= d.CAS || d2.Seq <= d.Seq || d2.Expiration != t0+100 {
		t.Fatalf("replace made %+v after %+v", d2, d)
	}
	sameEverywhere(t, bs, "a")
	clk.Advance(10)
	if _, err := c.TouchWith(ctx, "a", &engine.WriteOptions{Expiry: 1000}); err != nil {
		t.Fatal(err)
	}
	if got := sameEverywhere(t, bs, "a"); got.Expiration != t0+10+1000 {
		t.Fatalf("touch: expiration %d", got.Expiration)
	}
	for i := range 50 {
		if _, err := c.Upsert(ctx, fmt.Sprintf("k%d", i), []byte(`{}`), nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Delete(ctx, "k3", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Delete(ctx, "nope", nil); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("delete of a missing key: %v", err)
	}
	for i := range 50 {
		sameEverywhere(t, bs, fmt.Sprintf("k%d", i))
	}
	for i, b := range bs {
		if err := b.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if n := b.Stats().CurrItems; n != 50 {
			t.Errorf("replica %d: curr_items %d, want 50", i, n)
		}
		if got, want := b.ReplicatedDurable(part), bs[0].ReplicatedDurable(part); got != want || got == 0 {
			t.Errorf("replica %d: durable position %d, leader %d", i, got, want)
		}
	}
}

// An entry computed on a version that is no longer the key's newest (a
// write committed in between) changes nothing on any replica; the writer
// computes its write again and succeeds. An entry applied again (a replay
// after a restart) changes nothing; garbage is a per-entry failure.
func TestReplicatedConflictsAndReplays(t *testing.T) {
	ctx := context.Background()
	bs, r, _ := replicas(t, 2)
	c := bs[0].DefaultCollection()
	d, err := c.Upsert(ctx, "k", []byte(`1`), nil)
	if err != nil {
		t.Fatal(err)
	}
	part := int(d.Partition)
	stale := r.log[part][len(r.log[part])-1].data // computed on "no version"
	if _, err := c.Upsert(ctx, "k", []byte(`2`), nil); err != nil {
		t.Fatal(err)
	}
	before := sameEverywhere(t, bs, "k")
	for _, b := range bs {
		res, err := b.ApplyReplicated(part, before.Seq+10, stale)
		if err != nil || res.Err == nil || res.Doc != nil {
			t.Fatalf("a stale entry: %+v, %v", res, err)
		}
		res, err = b.ApplyReplicated(part, before.Seq, stale)
		if err != nil || res.Err == nil {
			t.Fatalf("a replayed entry: %+v, %v", res, err)
		}
		res, err = b.ApplyReplicated(part, before.Seq+11, []byte("garbage"))
		if err != nil || !errors.Is(res.Err, engine.ErrInvalidOp) {
			t.Fatalf("garbage: %+v, %v", res, err)
		}
	}
	if after := sameEverywhere(t, bs, "k"); after.Seq != before.Seq || string(after.Value) != "2" {
		t.Fatalf("a stale entry changed %+v into %+v", before, after)
	}
	// Concurrent writers of one key: every write answers, the replicas agree.
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 20 {
				if _, err := c.Upsert(ctx, "k", fmt.Appendf(nil, "%d", i*100+j), nil); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if got := sameEverywhere(t, bs, "k"); got.RevSeq != before.RevSeq+160 {
		t.Fatalf("revision %d after 160 writes on %d", got.RevSeq, before.RevSeq)
	}
}

// A replica's store holds its applied entries up to ReplicatedDurable:
// reopened, it has every version up to there, and applying the log from
// there on brings it level with the others.
func TestReplicatedDurablePositionAfterRestart(t *testing.T) {
	ctx := context.Background()
	bs, r, _ := replicas(t, 2)
	c := bs[0].DefaultCollection()
	var part int
	for i := range 20 {
		d, err := c.Upsert(ctx, "p", fmt.Appendf(nil, "%d", i), nil)
		if err != nil {
			t.Fatal(err)
		}
		part = int(d.Partition)
	}
	// A third replica, fresh, catches up from the whole log; another one
	// restarted from a snapshot of the first catches up from the snapshot.
	eng, _ := newEngine(t, t.TempDir())
	fresh, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "b", Type: engine.Couchbase})
	if err != nil {
		t.Fatal(err)
	}
	if err := bs[0].Sync(ctx); err != nil {
		t.Fatal(err)
	}
	snap, err := bs[0].ReplicatedSnapshot(part)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	eng2, _ := newEngine(t, dir)
	restored, err := eng2.CreateBucket(ctx, engine.BucketSettings{Name: "b", Type: engine.Couchbase})
	if err != nil {
		t.Fatal(err)
	}
	if err := restored.ReplicatedRestore(ctx, part, snap); err != nil {
		t.Fatal(err)
	}
	for _, e := range r.log[part] {
		if _, err := fresh.ApplyReplicated(part, e.index, e.data); err != nil {
			t.Fatal(err)
		}
		if _, err := restored.ApplyReplicated(part, e.index, e.data); err != nil {
			t.Fatal(err)
		}
	}
	sameEverywhere(t, []*engine.Bucket{bs[0], bs[1], fresh, restored}, "p")
	if got, want := restored.ReplicatedDurable(part), r.log[part][len(r.log[part])-1].index; got != want {
		t.Fatalf("restored: durable position %d, want %d", got, want)
	}

	// Reopened, the restored replica holds the same version.
	want := sameEverywhere(t, bs, "p")
	closeChecked(t, eng2)
	eng3, _ := newEngine(t, dir)
	re, err := eng3.Bucket("b")
	if err != nil {
		t.Fatal(err)
	}
	if err := re.WaitWarm(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := re.DefaultCollection().Get(ctx, "p")
	if err != nil || got.CAS != want.CAS || got.Seq != want.Seq || string(got.Value) != string(want.Value) {
		t.Fatalf("reopened: %+v %v, want %+v", got, err, want)
	}
	if re.ReplicatedDurable(part) != want.Seq {
		t.Fatalf("reopened: durable position %d, want %d", re.ReplicatedDurable(part), want.Seq)
	}
}

// A bucket whose writes are replicated makes no write outside its groups'
// logs: a flush is refused, and the pager's expirations take log indexes
// (the partition's durable position is its log's last index).
func TestReplicatedBucketMakesNoLocalWrites(t *testing.T) {
	ctx := context.Background()
	bs, r, clk := replicas(t, 2)
	c := bs[0].DefaultCollection()
	d, err := c.Upsert(ctx, "e", []byte(`{}`), &engine.WriteOptions{Expiry: 5})
	if err != nil {
		t.Fatal(err)
	}
	if err := bs[0].Sync(ctx); err != nil { // committed: in the expiry index
		t.Fatal(err)
	}
	clk.Advance(10)
	if n, _, err := bs[0].ExpireBatch(ctx, 100); err != nil || n != 1 {
		t.Fatalf("pager on a replicated bucket: %d, %v", n, err)
	}
	if _, err := bs[0].Flush(ctx); !errors.Is(err, engine.ErrInvalidOp) {
		t.Fatalf("flush: %v", err)
	}
	if err := bs[0].Sync(ctx); err != nil {
		t.Fatal(err)
	}
	part := int(d.Partition)
	if got, want := bs[0].ReplicatedDurable(part), r.log[part][len(r.log[part])-1].index; got != want {
		t.Fatalf("partition %d at %d, its log at %d", part, got, want)
	}
}

// A tombstone is purged on each node on its own schedule: a write on a key
// whose tombstone the leader still holds and a replica purged applies the
// same on both (same CAS, revision and sequence number).
func TestReplicatedWriteOverPurgedTombstone(t *testing.T) {
	ctx := context.Background()
	bs, _, clk := replicas(t, 2)
	c := bs[0].DefaultCollection()
	for _, k := range []string{"t", "other"} {
		if _, err := c.Upsert(ctx, k, []byte(`1`), nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Delete(ctx, "t", nil); err != nil {
		t.Fatal(err)
	}
	if err := bs[1].Sync(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Advance(10)
	if n, _, err := bs[1].PurgeTombstones(ctx, t0+5, 100); err != nil || n != 1 {
		t.Fatalf("purged %d tombstones on the replica: %v", n, err)
	}
	if _, err := c.Insert(ctx, "t", []byte(`2`), nil); err != nil {
		t.Fatal(err)
	}
	sameEverywhere(t, bs, "t")
}

// A node that does not lead a partition refuses every write to it alike,
// whatever its own copy holds: a delete of a key it holds no more, an
// insert of one it holds, a plain set.
func TestReplicatedNonLeaderRefusesEveryWrite(t *testing.T) {
	ctx := context.Background()
	bs, r, _ := replicas(t, 2)
	c := bs[0].DefaultCollection()
	if _, err := c.Upsert(ctx, "here", []byte(`1`), nil); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	r.refuse = true
	r.mu.Unlock()
	for what, write := range map[string]func() error{
		"delete of a missing key":   func() error { _, err := c.Delete(ctx, "missing", nil); return err },
		"insert of an existing key": func() error { _, err := c.Insert(ctx, "here", []byte(`2`), nil); return err },
		"upsert":                    func() error { _, err := c.Upsert(ctx, "here", []byte(`2`), nil); return err },
		"touch of a missing key":    func() error { _, err := c.Touch(ctx, "missing", 10); return err },
	} {
		if err := write(); !errors.Is(err, engine.ErrNotMyVBucket) {
			t.Errorf("%s on a node that does not lead: %v", what, err)
		}
	}
	if d := sameEverywhere(t, bs, "here"); string(d.Value) != "1" {
		t.Fatalf("a refused write changed the document: %s", d.Value)
	}
}
