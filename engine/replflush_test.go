package engine_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
)

// memLedger is a FlushLedger in memory, shared by the replicas as a
// cluster shares its record in etcd: the first cut recorded for a
// partition wins.
type memLedger struct {
	mu       sync.Mutex
	cuts     map[int]uint64
	finished []bool
}

func newMemLedger(parts int) *memLedger {
	return &memLedger{cuts: map[int]uint64{}, finished: make([]bool, parts)}
}

func (l *memLedger) FixCuts(_ context.Context, proposed map[int]uint64) (map[int]uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[int]uint64{}
	for part, cut := range proposed {
		if _, ok := l.cuts[part]; !ok {
			l.cuts[part] = cut
		}
		out[part] = l.cuts[part]
	}
	return out, nil
}

func (l *memLedger) Finish(_ context.Context, parts []int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range parts {
		l.finished[p] = true
	}
	return nil
}

func (l *memLedger) Finished() []bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.finished)
}

// unfinished returns the partitions no node has finished.
func (l *memLedger) unfinished() []int {
	var out []int
	for p, f := range l.Finished() {
		if !f {
			out = append(out, p)
		}
	}
	return out
}

// startFlush starts flush rev on every replica, each looking again every
// every.
func startFlush(bs []*engine.Bucket, l engine.FlushLedger, rev uint64, every time.Duration) {
	for _, b := range bs {
		engine.SetFlushCatchUp(b, every)
		b.StartFlush(rev, l)
	}
}

// waitFlushExited waits (a test's patience: it asserts the outcome, not
// how soon) until b's flush pass has returned.
func waitFlushExited(t *testing.T, b *engine.Bucket, who string) {
	t.Helper()
	select {
	case <-engine.FlushPassExited(b):
	case <-time.After(time.Minute):
		t.Fatalf("%s's flush pass never returned", who)
	}
}

// deletedEverywhere checks that every replica holds key as the same
// tombstone (sequence number, CAS, revision), expired or deleted as want
// says, and returns it.
func deletedEverywhere(t *testing.T, bs []*engine.Bucket, key string, expired bool) *engine.Document {
	t.Helper()
	var want *engine.Document
	for i, b := range bs {
		d, err := b.DefaultCollection().Tombstone(key)
		if err != nil {
			t.Fatalf("%q on replica %d: %v", key, i, err)
		}
		if d.Expired != expired {
			t.Fatalf("%q on replica %d: expired %v, want %v", key, i, d.Expired, expired)
		}
		if want == nil {
			want = d
			continue
		}
		if d.Seq != want.Seq || d.CAS != want.CAS || d.RevSeq != want.RevSeq || d.DeletedAt != want.DeletedAt {
			t.Fatalf("%q: replica %d has %+v, replica 0 %+v", key, i, d, want)
		}
	}
	return want
}

// A flush of a replicated bucket deletes every document on every replica
// alike, proposed by the partitions' leader: every replica's curr_items
// drops to 0, each key is the same tombstone everywhere (sequence number,
// CAS, revision), a document expired but not yet paged is expired (its
// reason kept), and every partition is recorded finished, after which
// every node's pass returns (followers included, which proposed nothing).
func TestReplicatedFlushOnEveryReplica(t *testing.T) {
	ctx := context.Background()
	bs, _, clks := replicaClocks(t, 3)
	followers(bs)
	c := bs[0].DefaultCollection()
	var keys []string
	for i := range 200 {
		k := fmt.Sprintf("k%03d", i)
		keys = append(keys, k)
		if _, err := c.Upsert(ctx, k, []byte(`{"v":1}`), nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Upsert(ctx, "exp", []byte(`{}`), &engine.WriteOptions{Expiry: 5}); err != nil {
		t.Fatal(err)
	}
	advanceAll(clks, 10) // "exp" is expired, not yet paged
	countsEverywhere(t, bs, 201)

	l := newMemLedger(bs[0].NumPartitions())
	startFlush(bs, l, 1, 10*time.Millisecond)
	for i, b := range bs {
		waitFlushExited(t, b, fmt.Sprintf("replica %d", i))
	}
	if left := l.unfinished(); len(left) != 0 {
		t.Fatalf("partitions not recorded finished: %v", left)
	}
	countsEverywhere(t, bs, 0)
	for _, k := range keys {
		deletedEverywhere(t, bs, k, false)
		if _, err := bs[1].DefaultCollection().Get(ctx, k); !errors.Is(err, engine.ErrNotFound) {
			t.Fatalf("%q after the flush on a follower: %v", k, err)
		}
	}
	deletedEverywhere(t, bs, "exp", true)
	if got := bs[0].FlushDeleted(1); got != 201 {
		t.Fatalf("the leader counts %d deletions, want 201", got)
	}
	for i, b := range bs[1:] {
		if got := b.FlushDeleted(1); got != 0 {
			t.Fatalf("follower %d counts %d deletions: it leads nothing", i+1, got)
		}
	}
	// The same flush applied again (a node re-reading the cluster's
	// record) starts nothing.
	bs[0].StartFlush(1, l)
	if got := bs[0].FlushDeleted(1); got != 201 {
		t.Fatalf("the flush applied again: %d deletions counted", got)
	}
}

// raceReplicator runs race once, before the first entry proposed to
// partition part is given its index: a client's write racing it.
type raceReplicator struct {
	*logReplicator
	part  int
	raced atomic.Bool
	race  func()
}

func (r *raceReplicator) Replicate(ctx context.Context, part int, entry []byte) (engine.ReplicatedResult, error) {
	if part == r.part && r.raced.CompareAndSwap(false, true) {
		r.race() // its own write comes back here, raced already
	}
	return r.logReplicator.Replicate(ctx, part, entry)
}

// A write that races the flush keeps what it wrote: one overtaking the
// deletion of its key (the deletion is refused on every replica and
// decided again on the newer version, past the cut: kept), and a new key.
func TestReplicatedFlushKeepsARacingWrite(t *testing.T) {
	ctx := context.Background()
	bs, r, _ := replicaClocks(t, 3)
	followers(bs)
	c := bs[0].DefaultCollection()
	byPart := map[int][]string{}
	for i := range 50 {
		k := fmt.Sprintf("k%03d", i)
		byPart[bs[0].PartitionOf(k)] = append(byPart[bs[0].PartitionOf(k)], k)
		if _, err := c.Upsert(ctx, k, []byte(`{"v":1}`), nil); err != nil {
			t.Fatal(err)
		}
	}
	// The racing key is the only one of its partition: the first entry
	// proposed there is its deletion, decided on its first version.
	raced := ""
	for _, ks := range byPart {
		if len(ks) == 1 {
			raced = ks[0]
			break
		}
	}
	if raced == "" {
		t.Fatal("no key alone in its partition")
	}
	fresh := "new"
	for i := 0; bs[0].PartitionOf(fresh) != bs[0].PartitionOf(raced); i++ {
		fresh = fmt.Sprintf("new%d", i)
	}
	bs[0].SetReplicator(&raceReplicator{logReplicator: r, part: bs[0].PartitionOf(raced), race: func() {
		for _, k := range []string{raced, fresh} {
			if _, err := c.Upsert(ctx, k, []byte(`{"v":2}`), nil); err != nil {
				t.Error(err)
			}
		}
	}})
	l := newMemLedger(bs[0].NumPartitions())
	startFlush(bs, l, 1, 10*time.Millisecond)
	for i, b := range bs {
		waitFlushExited(t, b, fmt.Sprintf("replica %d", i))
	}
	countsEverywhere(t, bs, 2)
	for _, k := range []string{raced, fresh} {
		if d := sameEverywhere(t, bs, k); string(d.Value) != `{"v":2}` {
			t.Fatalf("%q after the flush: %s", k, d.Value)
		}
	}
}

// A partition whose leader could not finish it (its proposals failed) is
// finished by its next leader, up to the cut the first leader fixed: the
// documents written before the flush are deleted on every replica, and a
// write acknowledged after the cut (after the flush was asked, before the
// new leader got to the partition) survives the late catch-up.
func TestReplicatedFlushFinishedByTheNextLeader(t *testing.T) {
	ctx := context.Background()
	bs, r, _ := replicaClocks(t, 3)
	followers(bs)
	c := bs[0].DefaultCollection()
	const held = 0 // the partition whose proposals fail on the first leader
	var inHeld, others []string
	for i := 0; len(inHeld) < 5 || len(others) < 50; i++ {
		k := fmt.Sprintf("k%05d", i)
		if bs[0].PartitionOf(k) == held {
			if len(inHeld) == 5 {
				continue
			}
			inHeld = append(inHeld, k)
		} else {
			if len(others) == 50 {
				continue
			}
			others = append(others, k)
		}
		if _, err := c.Upsert(ctx, k, []byte(`{"v":1}`), nil); err != nil {
			t.Fatal(err)
		}
	}
	r.mu.Lock()
	r.failPart = map[int]error{held: fmt.Errorf("%w: this group's leader is busy", engine.ErrTempFail)}
	r.mu.Unlock()
	l := newMemLedger(bs[0].NumPartitions())
	// The first leader looks once (its next look is an hour away); the
	// others every 10 ms.
	engine.SetFlushCatchUp(bs[0], time.Hour)
	bs[0].StartFlush(1, l)
	startFlush(bs[1:], l, 1, 10*time.Millisecond)
	for deadline := time.Now().Add(time.Minute); !slices.Equal(l.unfinished(), []int{held}); { // wall clock: a hang guard
		if time.Now().After(deadline) { // wall clock: a hang guard
			t.Fatalf("the first leader's pass left %v unfinished, want [%d]", l.unfinished(), held)
		}
		time.Sleep(time.Millisecond)
	}
	for _, k := range inHeld {
		if d := sameEverywhere(t, bs, k); d == nil {
			t.Fatalf("%q, in the partition left, is gone", k)
		}
	}
	// The partition takes writes again; one is written after the cut.
	r.mu.Lock()
	r.failPart = nil
	r.mu.Unlock()
	late := "late"
	for i := 0; bs[0].PartitionOf(late) != held; i++ {
		late = fmt.Sprintf("late%d", i)
	}
	if _, err := c.Upsert(ctx, late, []byte(`{"v":2}`), nil); err != nil {
		t.Fatal(err)
	}
	// Leadership moves to replica 1, whose catch-up finishes the partition.
	r.mu.Lock()
	r.refuse = true
	next, log := maps.Clone(r.next), maps.Clone(r.log)
	r.mu.Unlock()
	bs[1].SetReplicator(&logReplicator{replicas: bs, leader: 1, next: next, log: log})
	waitFlushExited(t, bs[1], "the new leader")
	waitFlushExited(t, bs[2], "the follower")
	if left := l.unfinished(); len(left) != 0 {
		t.Fatalf("partitions not recorded finished: %v", left)
	}
	countsEverywhere(t, bs, 1)
	for _, k := range append(inHeld, others...) {
		deletedEverywhere(t, bs, k, false)
	}
	if d := sameEverywhere(t, bs, late); string(d.Value) != `{"v":2}` {
		t.Fatalf("%q after the late catch-up: %s", late, d.Value)
	}
	if got := bs[1].FlushDeleted(1); got != int64(len(inHeld)) {
		t.Fatalf("the new leader deleted %d documents, want the %d of the partition left", got, len(inHeld))
	}
}
