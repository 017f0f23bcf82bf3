package engine_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
)

// ttlReplicas opens three replicas (the first leads every partition, the
// others none) with collection s.c from one manifest, as a cluster's nodes
// apply it, and returns them, the replicator, the clocks, the manifest and
// each replica's s.c.
func ttlReplicas(t *testing.T) ([]*engine.Bucket, *logReplicator, []*engine.FakeClock, engine.Manifest, []*engine.Collection) {
	t.Helper()
	return ttlReplicasOf(t, engine.BucketSettings{Name: "b", Type: engine.Couchbase})
}

// ttlReplicasOf is ttlReplicas for buckets of settings s.
func ttlReplicasOf(t *testing.T, s engine.BucketSettings) ([]*engine.Bucket, *logReplicator, []*engine.FakeClock, engine.Manifest, []*engine.Collection) {
	t.Helper()
	ctx := context.Background()
	bs, r, clks := replicaBuckets(t, 3, s)
	followers(bs)
	m := bs[0].Manifest()
	if err := m.CreateScope("s"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.CreateCollection("s", "c", engine.CollectionSettings{}); err != nil {
		t.Fatal(err)
	}
	cols := make([]*engine.Collection, len(bs))
	for i, b := range bs {
		if err := b.ApplyManifest(ctx, m); err != nil {
			t.Fatal(err)
		}
		c, err := b.Collection("s", "c")
		if err != nil {
			t.Fatal(err)
		}
		cols[i] = c
	}
	return bs, r, clks, m, cols
}

// setDefaultTTL changes s.c's defaultTTL in m (a new TTLRev and UID, as a
// cluster's PATCH does), applies m to the replicas in order, waiting for
// each one's re-evaluation, and returns how many each re-wrote.
func setDefaultTTL(t *testing.T, m *engine.Manifest, ttl int64, bs ...*engine.Bucket) []int {
	t.Helper()
	return setTTL(t, m, func(cs *engine.CollectionSettings) { cs.DefaultTTL = ttl }, bs...)
}

// setTTLLeaderless is setTTL while no node can propose (r refuses every
// write, and still does when it returns): every first pass must re-write
// nothing, leaving the partitions to the catch-ups.
func setTTLLeaderless(t *testing.T, r *logReplicator, m *engine.Manifest, edit func(*engine.CollectionSettings), bs ...*engine.Bucket) {
	t.Helper()
	r.mu.Lock()
	r.refuse = true
	r.mu.Unlock()
	for i, n := range setTTL(t, m, edit, bs...) {
		if n != 0 {
			t.Fatalf("replica %d's first pass, with no leader, re-wrote %d documents", i, n)
		}
	}
}

// setTTL is setDefaultTTL for any change of s.c's settings (edit).
func setTTL(t *testing.T, m *engine.Manifest, edit func(*engine.CollectionSettings), bs ...*engine.Bucket) []int {
	t.Helper()
	ci, err := m.UpdateCollection("s", "c", nowOf(bs), func(cs *engine.CollectionSettings) error {
		edit(cs)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return applyTTL(t, *m, ci.ID, bs...)
}

// applyTTL applies m to the replicas in order, waiting for each one's
// re-evaluation of collection cid, and returns how many each re-wrote.
func applyTTL(t *testing.T, m engine.Manifest, cid engine.CollectionID, bs ...*engine.Bucket) []int {
	t.Helper()
	ctx := context.Background()
	var ns []int
	for _, b := range bs {
		if err := b.ApplyManifest(ctx, m); err != nil {
			t.Fatal(err)
		}
		n, err := b.WaitReevaluation(ctx, cid, m.UID)
		if err != nil {
			t.Fatal(err)
		}
		ns = append(ns, n)
	}
	return ns
}

// ttlReplicasCatchingUp is ttlReplicas whose catch-ups look every every.
func ttlReplicasCatchingUp(t *testing.T, every time.Duration) ([]*engine.Bucket, *logReplicator, []*engine.FakeClock, engine.Manifest, []*engine.Collection) {
	t.Helper()
	bs, r, clks, m, cols := ttlReplicas(t)
	for _, b := range bs {
		engine.SetTTLCatchUp(b, every)
	}
	return bs, r, clks, m, cols
}

// logLen is how many entries partition part's log holds.
func logLen(r *logReplicator, part int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.log[part])
}

// sameInCollection checks that every replica reads key of its collection
// as the first one does (sequence number, CAS, revision, expiration, value)
// and returns the first one's version.
func sameInCollection(t *testing.T, cols []*engine.Collection, key string) *engine.Document {
	t.Helper()
	ctx := context.Background()
	want, err := cols[0].Get(ctx, key)
	if err != nil {
		t.Fatalf("%q on the leader: %v", key, err)
	}
	for i, c := range cols[1:] {
		got, err := c.Get(ctx, key)
		if err != nil {
			t.Fatalf("%q on replica %d: %v", key, i+1, err)
		}
		if got.Seq != want.Seq || got.CAS != want.CAS || got.RevSeq != want.RevSeq || got.Expiration != want.Expiration ||
			got.TS != want.TS || string(got.Value) != string(want.Value) {
			t.Fatalf("%q: replica %d has %+v, the leader %+v", key, i+1, got, want)
		}
	}
	return want
}

// A defaultTTL set on a replicated bucket's collection, applied by every
// replica from one manifest, re-derives the documents' expirations as
// replicated writes of the partitions' leader: every replica ends with the
// same sequence number, CAS and expiration; each re-written document took a
// new CAS and revision as a touch does on one node, and kept its meta.ts;
// a pinned expiration and a "ttl":-1 document are left; followers propose
// nothing.
func TestReplicatedReevaluationSameOnEveryReplica(t *testing.T) {
	ctx := context.Background()
	bs, r, clks, m, cols := ttlReplicas(t)
	written := map[string]*engine.Document{}
	for key, val := range map[string]string{"a": `{"v":1}`, "b": `{"v":2,"ttl":50}`, "never": `{"ttl":-1}`} {
		d, err := cols[0].Upsert(ctx, key, []byte(val), nil)
		if err != nil {
			t.Fatal(err)
		}
		written[key] = d
	}
	pinned, err := cols[0].Upsert(ctx, "pinned", []byte(`{"v":3}`), &engine.WriteOptions{Expiry: 1000})
	if err != nil {
		t.Fatal(err)
	}
	written["pinned"] = pinned
	logged := map[int]int{}
	for _, d := range written {
		logged[int(d.Partition)] = logLen(r, int(d.Partition))
	}
	advanceAll(clks, 10)

	// The followers apply first: they lead nothing, so they propose nothing.
	if ns := setDefaultTTL(t, &m, 100, bs[1:]...); ns[0] != 0 || ns[1] != 0 {
		t.Fatalf("followers re-wrote %v", ns)
	}
	for part, n := range logged {
		if got := logLen(r, part); got != n {
			t.Fatalf("partition %d's log grew from %d to %d entries on the followers' re-evaluation", part, n, got)
		}
	}
	if ns := setDefaultTTL(t, &m, 100, bs[0]); ns[0] != 2 {
		t.Fatalf("the leader re-wrote %d documents, want 2 (a and b)", ns[0])
	}
	for key, ttl := range map[string]int64{"a": 100, "b": 50} {
		w := written[key]
		d := sameInCollection(t, cols, key)
		if d.Expiration != w.TS+ttl {
			t.Fatalf("%q: expiration %d, want its write's meta.ts %d + %d", key, d.Expiration, w.TS, ttl)
		}
		if d.TS != w.TS || d.CAS <= w.CAS || d.RevSeq != w.RevSeq+1 || d.Seq <= w.Seq || string(d.Value) != string(w.Value) {
			t.Fatalf("%q: re-evaluated %+v from %+v, want a touch: same value and meta.ts, a new CAS, revision and sequence number", key, d, w)
		}
	}
	for _, key := range []string{"never", "pinned"} {
		w := written[key]
		if d := sameInCollection(t, cols, key); d.Seq != w.Seq || d.CAS != w.CAS || d.Expiration != w.Expiration {
			t.Fatalf("%q: %+v, want it left as written %+v", key, d, w)
		}
	}

	// Removing defaultTTL lifts the TTL rule's expirations, alike everywhere.
	setDefaultTTL(t, &m, 0, bs...)
	for _, key := range []string{"a", "b"} {
		if d := sameInCollection(t, cols, key); d.Expiration != 0 {
			t.Fatalf("%q: expiration %d after defaultTTL was removed", key, d.Expiration)
		}
	}
}

// A write of a key between the re-evaluation's decision and its apply
// wins on every replica: the touch is refused, and the key, decided again,
// has the expiration its write derived under the new settings.
func TestReplicatedReevaluationLosesToAWrite(t *testing.T) {
	ctx := context.Background()
	bs, r, clks, m, cols := ttlReplicas(t)
	if _, err := cols[0].Upsert(ctx, "k", []byte(`{"v":1}`), nil); err != nil {
		t.Fatal(err)
	}
	advanceAll(clks, 10)
	var raced *engine.Document
	r.mu.Lock()
	r.beforeApply = func() {
		var err error
		if raced, err = cols[0].Upsert(ctx, "k", []byte(`{"v":2}`), nil); err != nil {
			t.Error(err)
		}
	}
	r.mu.Unlock()
	setDefaultTTL(t, &m, 100, bs[1:]...)
	if ns := setDefaultTTL(t, &m, 100, bs[0]); ns[0] != 0 {
		t.Fatalf("the leader counts %d re-written documents; the write came first", ns[0])
	}
	if raced == nil {
		t.Fatal("the racing write did not run")
	}
	d := sameInCollection(t, cols, "k")
	if d.Seq != raced.Seq || d.CAS != raced.CAS || string(d.Value) != `{"v":2}` {
		t.Fatalf("k is %+v, want the racing write %+v", d, raced)
	}
	if want := raced.TS + 100; d.Expiration != want {
		t.Fatalf("k expires at %d, want %d (the racing write under the new defaultTTL)", d.Expiration, want)
	}
}

// leaderlessPass opens ttlReplicas whose catch-ups look every catchUp,
// writes k, and sets defaultTTL 100 while no node can propose (every
// first pass re-writes nothing), then lets the leader propose again. It
// returns the replicas, the replicator, the manifest, the collections and
// k's write.
func leaderlessPass(t *testing.T, catchUp time.Duration) ([]*engine.Bucket, *logReplicator, engine.Manifest, []*engine.Collection, *engine.Document) {
	t.Helper()
	ctx := context.Background()
	bs, r, clks, m, cols := ttlReplicasCatchingUp(t, catchUp)
	w, err := cols[0].Upsert(ctx, "k", []byte(`{"v":1}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	advanceAll(clks, 10)
	setTTLLeaderless(t, r, &m, func(cs *engine.CollectionSettings) { cs.DefaultTTL = 100 }, bs...)
	if d := sameInCollection(t, cols, "k"); d.Expiration != 0 {
		t.Fatalf("k expires at %d with no leader to re-evaluate it", d.Expiration)
	}
	r.mu.Lock()
	r.refuse = false
	r.mu.Unlock()
	return bs, r, m, cols, w
}

// A leader that did not lead when it applied the settings (leadership
// moved, or it was down) leaves the documents' expirations as they were
// until it catches up (not within this test: its catch-up is an hour
// away); applying the same settings again (a new TTLRev) re-runs the pass
// on every node and re-derives them, and a third run proposes nothing.
func TestReplicatedReevaluationRerun(t *testing.T) {
	bs, r, m, cols, w := leaderlessPass(t, time.Hour)
	if ns := setDefaultTTL(t, &m, 100, bs...); ns[0] != 1 {
		t.Fatalf("the re-run re-wrote %d documents, want 1", ns[0])
	}
	if d := sameInCollection(t, cols, "k"); d.Expiration != w.TS+100 {
		t.Fatalf("k expires at %d after the re-run, want %d", d.Expiration, w.TS+100)
	}
	part := int(w.Partition)
	n := logLen(r, part)
	if ns := setDefaultTTL(t, &m, 100, bs...); ns[0] != 0 || logLen(r, part) != n {
		t.Fatalf("a run over right expirations re-wrote %d and logged %d entries", ns[0], logLen(r, part)-n)
	}
}

// Bucket.UpdateCollection on a replicated bucket's leader is no longer
// refused: it re-evaluates the partitions the node leads as replicated
// writes (a follower given the same settings writes nothing).
func TestReplicatedUpdateCollection(t *testing.T) {
	ctx := context.Background()
	bs, _, clks, _, cols := ttlReplicas(t)
	w, err := cols[0].Upsert(ctx, "k", []byte(`{"v":1}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	advanceAll(clks, 10)
	for i := len(bs) - 1; i >= 0; i-- {
		_, n, err := bs[i].UpdateCollection(ctx, "s", "c", func(cs *engine.CollectionSettings) error {
			cs.DefaultTTL = 60
			return nil
		})
		if err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
		if want := map[bool]int{true: 1, false: 0}[i == 0]; n != want {
			t.Fatalf("replica %d re-wrote %d, want %d", i, n, want)
		}
	}
	if d := sameInCollection(t, cols, "k"); d.Expiration != w.TS+60 {
		t.Fatalf("k expires at %d, want %d", d.Expiration, w.TS+60)
	}
}

// A partition no node could propose to when the settings were applied
// (an election: every node's pass went by it) is caught up by the node
// that leads it next, without a re-run: its documents get the derived
// expiration, the same on every replica, and the catch-up counts them.
// A pass that stopped on a temporary failure is caught up the same way.
func TestReplicatedReevaluationCatchesUp(t *testing.T) {
	ctx := context.Background()
	bs, r, m, cols, w := leaderlessPass(t, 10*time.Millisecond)
	waitExpiration(t, cols, "k", w.TS+100)
	// The catch-up counts a document once its write returns, which may be
	// a moment after every replica shows it (seen on a loaded machine).
	deadline := time.Now().Add(time.Minute) // wall clock: a test's patience
	for engine.TTLCaughtUp(bs[0], cols[0].ID()) != 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := engine.TTLCaughtUp(bs[0], cols[0].ID()); got != 1 {
		t.Fatalf("the catch-up counts %d documents, want 1", got)
	}

	// A temporary failure stops the first pass; the catch-up finishes it.
	r.mu.Lock()
	r.fail = fmt.Errorf("%w: no quorum for a moment", engine.ErrTempFail)
	r.mu.Unlock()
	ci, err := m.UpdateCollection("s", "c", nowOf(bs), func(cs *engine.CollectionSettings) error {
		cs.DefaultTTL = 200
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bs {
		if err := b.ApplyManifest(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := bs[0].WaitReevaluation(ctx, ci.ID, m.UID); n != 0 || !errors.Is(err, engine.ErrTempFail) {
		t.Fatalf("a pass whose every proposal failed: %d re-written, %v", n, err)
	}
	r.mu.Lock()
	r.fail = nil
	r.mu.Unlock()
	waitExpiration(t, cols, "k", w.TS+200)
}

// waitExpiration waits (up to a minute: it asserts the outcome, not how
// soon) until every replica holds key, alike, with expiration want. It
// peeks (a read of a sliding collection's document would slide it).
func waitExpiration(t *testing.T, cols []*engine.Collection, key string, want int64) {
	t.Helper()
	deadline := time.Now().Add(time.Minute) // wall clock: a test's patience, not an expiry decision
	for {
		got, err := peekSame(cols, key)
		if err == nil && got.Expiration == want {
			return
		}
		if time.Now().After(deadline) { // wall clock: a test's patience
			if err != nil {
				t.Fatal(err)
			}
			t.Fatalf("%s: expiration %d, never %d", key, got.Expiration, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// peekSame peeks at key on every replica and returns the first one's
// version, or an error if another's differs (a replicated write applied on
// some replicas only, for the moment, is retried by the caller's wait).
func peekSame(cols []*engine.Collection, key string) (*engine.Document, error) {
	var first *engine.Document
	for i, c := range cols {
		d, err := c.Peek(key)
		if err != nil {
			return nil, fmt.Errorf("%q on replica %d: %w", key, i, err)
		}
		if first == nil {
			first = d
		} else if d.Seq != first.Seq || d.CAS != first.CAS || d.Expiration != first.Expiration {
			return nil, fmt.Errorf("%q: replica %d has %+v, replica 0 %+v", key, i, d, first)
		}
	}
	return first, nil
}

// A catch-up re-writes what an on-time pass would have, no more: a
// sliding rule counts from when the node applied the settings (a
// document idle since then does not get another idleTTL from the
// catch-up's time), and a document written after that, already under the
// new settings, is left as written.
func TestReplicatedReevaluationCatchUpAsOfItsStart(t *testing.T) {
	ctx := context.Background()
	// Catch-ups long enough apart that the write and read below come first.
	bs, r, clks, m, cols := ttlReplicasCatchingUp(t, 2*time.Second)
	for _, k := range []string{"idle", "read"} {
		if _, err := cols[0].Upsert(ctx, k, []byte(`{"v":1}`), nil); err != nil {
			t.Fatal(err)
		}
	}
	advanceAll(clks, 10)
	applied := clks[0].Now()
	setTTLLeaderless(t, r, &m, func(cs *engine.CollectionSettings) { cs.IdleTTL = 1000 }, bs...)
	advanceAll(clks, 30)
	r.mu.Lock()
	r.refuse = false
	r.mu.Unlock()
	fresh, err := cols[0].Upsert(ctx, "fresh", []byte(`{"v":2}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := clks[0].Now() + 1000; fresh.Expiration != want {
		t.Fatalf("a write under idleTTL 1000 expires at %d, want %d", fresh.Expiration, want)
	}
	// A read on the leader slides "read" from now, under the new rule
	// (once its version is on disk: one on its way there has the rule
	// applied by its own write).
	if err := bs[0].Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cols[0].Get(ctx, "read"); err != nil {
		t.Fatal(err)
	}
	waitExpiration(t, cols, "read", clks[0].Now()+1000)
	slid, err := peekSame(cols, "read")
	if err != nil {
		t.Fatal(err)
	}
	waitExpiration(t, cols, "idle", applied+1000)
	if d, err := peekSame(cols, "fresh"); err != nil || d.Seq != fresh.Seq || d.Expiration != fresh.Expiration {
		t.Fatalf("the catch-up re-wrote a document written after the settings: %+v (%v), was %+v", d, err, fresh)
	}
	if d, err := peekSame(cols, "read"); err != nil || d.Seq != slid.Seq || d.Expiration != slid.Expiration {
		t.Fatalf("the catch-up re-wrote a document read after the settings: %+v (%v), was %+v", d, err, slid)
	}
}

// A catch-up that finds no partition to do reads nothing: on a
// fullEviction bucket whose items left memory, a follower (it leads no
// partition) looks many times and reads no key back from disk; a pass
// would read every key of the collection first.
func TestReplicatedReevaluationCatchUpIdleReadsNothing(t *testing.T) {
	ctx := context.Background()
	bs, _, _, m, cols := ttlReplicasOf(t, engine.BucketSettings{Name: "b", Type: engine.Couchbase, EvictionPolicy: engine.FullEviction})
	for _, b := range bs {
		engine.SetTTLCatchUp(b, time.Millisecond)
	}
	for i := range 200 {
		if _, err := cols[0].Upsert(ctx, fmt.Sprintf("k%03d", i), []byte(`{"v":1}`), nil); err != nil {
			t.Fatal(err)
		}
	}
	setDefaultTTL(t, &m, 100, bs...) // the first pass puts every item back
	follower := bs[1]
	if err := follower.Sync(ctx); err != nil { // the pass's versions on disk, so they may leave
		t.Fatal(err)
	}
	if n := engine.EvictItems(follower); n == 0 {
		t.Fatal("no item left the follower's memory")
	}
	before := engine.StoreKeysRead(follower)
	time.Sleep(200 * time.Millisecond) // ~200 looks of its catch-up
	if read := engine.StoreKeysRead(follower) - before; read != 0 {
		t.Fatalf("the follower's idle catch-up read %d keys from disk", read)
	}
}

// nowOf is the time on the first of bs's clocks (0 when there is none): a
// manifest change's time, as the node making it stamps it.
func nowOf(bs []*engine.Bucket) int64 {
	if len(bs) == 0 {
		return 0
	}
	return bs[0].Clock().Now()
}
