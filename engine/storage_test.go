package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/internal/logtest"
)

// The conformance suite of the storage seam: every implementation of
// storage runs it. A store that is not durable keeps no documents and
// cannot be reopened; everything else it must do as the durable one does.

// storageKind opens one implementation for a test.
type storageKind struct {
	name string
	open func(t *testing.T) storage
	// reopen closes st (cleanly or not) and opens what it kept; nil for a
	// store that keeps nothing across a restart.
	reopen func(t *testing.T, st storage, clean bool) storage
}

func storageKinds() []storageKind {
	return []storageKind{
		{
			name: "bolt",
			open: func(t *testing.T) storage {
				return openBoltForTest(t, filepath.Join(t.TempDir(), boltFile))
			},
			reopen: func(t *testing.T, st storage, clean bool) storage {
				path := st.(*boltStorage).db.Path()
				if err := st.close(clean); err != nil {
					t.Fatal(err)
				}
				return openBoltForTest(t, path)
			},
		},
		{
			name: "pebble",
			open: func(t *testing.T) storage {
				return openPebbleForTest(t, filepath.Join(t.TempDir(), pebbleDir))
			},
			reopen: func(t *testing.T, st storage, clean bool) storage {
				dir := st.(*pebbleStorage).dir
				if err := st.close(clean); err != nil {
					t.Fatal(err)
				}
				return openPebbleForTest(t, dir)
			},
		},
		{
			name: "memory",
			open: func(t *testing.T) storage {
				st := newMemStorage(8)
				t.Cleanup(func() { st.close(false) })
				return st
			},
		},
	}
}

func openBoltForTest(t *testing.T, path string) *boltStorage {
	t.Helper()
	st, err := openBoltStorage(path, &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.db.Close() }) // a no-op once closed
	return st
}

func openPebbleForTest(t *testing.T, dir string) *pebbleStorage {
	t.Helper()
	st, err := openPebbleStorage(dir, &Options{NoSync: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.close(false) }) // a no-op once closed
	return st
}

func forEachStorage(t *testing.T, fn func(t *testing.T, k storageKind)) {
	for _, k := range storageKinds() {
		t.Run(k.name, func(t *testing.T) { fn(t, k) })
	}
}

// testDoc is a document as the engine stamps it before queueing it.
func testDoc(cid CollectionID, key string, part uint16, seq, cas uint64, exp int64, value string) *Document {
	return &Document{Key: key, Collection: cid, Partition: part, Seq: seq, CAS: cas, RevSeq: seq, Expiration: exp, Value: []byte(value), Type: TypeJSON}
}

// put is the record of a write of d over a stored record expiring at oldExp.
func put(d *Document, oldExp int64) record {
	return record{doc: d, key: docKey{cid: d.Collection, key: d.Key}, oldExp: oldExp, part: d.Partition, seq: d.Seq, cas: d.CAS}
}

func mustCommit(t *testing.T, st storage, recs ...record) {
	t.Helper()
	if err := st.commit(recs); err != nil {
		t.Fatalf("commit: %v", err)
	}
}

// stored is everything a store holds, read through the interface.
type stored struct {
	docs  []*Document
	exps  []expItem
	seqs  map[uint16]uint64
	meta  storedMeta
	byKey map[docKey]*Document
}

func readAll(t *testing.T, st storage) stored {
	t.Helper()
	s := stored{byKey: map[docKey]*Document{}}
	if err := st.scan(func(d *Document) error { s.docs = append(s.docs, d); return nil }); err != nil {
		t.Fatalf("scan: %v", err)
	}
	for _, d := range s.docs {
		k := docKey{cid: d.Collection, key: d.Key}
		got, err := st.doc(k)
		if err != nil {
			t.Fatalf("doc(%q) of a scanned document: %v", d.Key, err)
		}
		if !sameDoc(got, d) {
			t.Errorf("doc(%q) = %+v, scan gave %+v", d.Key, got, d)
		}
		s.byKey[k] = d
	}
	if err := st.expiries(func(it expItem) error { s.exps = append(s.exps, it); return nil }); err != nil {
		t.Fatalf("expiries: %v", err)
	}
	var err error
	if s.seqs, err = st.seqnos(); err != nil {
		t.Fatalf("seqnos: %v", err)
	}
	if s.meta, err = st.meta(); err != nil {
		t.Fatalf("meta: %v", err)
	}
	return s
}

func sameDoc(a, b *Document) bool {
	return a.Key == b.Key && a.Collection == b.Collection && a.Partition == b.Partition && a.Seq == b.Seq && a.CAS == b.CAS &&
		a.RevSeq == b.RevSeq && a.Expiration == b.Expiration && a.Deleted == b.Deleted && a.Expired == b.Expired && a.DeletedAt == b.DeletedAt &&
		string(a.Value) == string(b.Value) && a.Type == b.Type
}

func docKeys(docs []*Document) []string {
	var out []string
	for _, d := range docs {
		out = append(out, d.Key)
	}
	return out
}

// What a commit makes visible: documents by key and in a scan (key order:
// collection, then key), expiry entries in expiration order, sequence
// numbers and the CAS.
func TestStorageCommitVisible(t *testing.T) {
	forEachStorage(t, func(t *testing.T, k storageKind) {
		st := k.open(t)
		b := testDoc(8, "b", 1, 1, 30, 0, `{"b":1}`)
		c := testDoc(DefaultCollectionID, "c", 0, 1, 10, 200, `{"c":1}`)
		a := testDoc(DefaultCollectionID, "a", 0, 2, 20, 100, `{"a":1}`)
		mustCommit(t, st, put(b, 0), put(c, 0), put(a, 0))
		got := readAll(t, st)
		if !maps.Equal(got.seqs, map[uint16]uint64{0: 2, 1: 1}) {
			t.Errorf("seqnos %v, want partition 0 at 2, 1 at 1", got.seqs)
		}
		if got.meta.cas != 30 {
			t.Errorf("cas %d, want 30", got.meta.cas)
		}
		_, err := st.doc(docKey{key: "missing"})
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("doc of a key never written: %v, want ErrNotFound", err)
		}
		if !st.durable() {
			if len(got.docs) != 0 || len(got.exps) != 0 {
				t.Errorf("a memory store kept %d documents, %d expiry entries", len(got.docs), len(got.exps))
			}
			if _, err := st.doc(docKey{key: "a"}); !errors.Is(err, ErrNotFound) {
				t.Errorf("memory store doc: %v, want ErrNotFound", err)
			}
			return
		}
		if keys := docKeys(got.docs); !slices.Equal(keys, []string{"a", "c", "b"}) {
			t.Errorf("scan order %v, want a c (collection 0) then b (collection 8)", keys)
		}
		if !sameDoc(got.byKey[docKey{key: "a"}], a) || !sameDoc(got.byKey[docKey{cid: 8, key: "b"}], b) {
			t.Errorf("stored documents differ from committed ones")
		}
		want := []expItem{{exp: 100, key: docKey{key: "a"}}, {exp: 200, key: docKey{key: "c"}}}
		if !slices.Equal(got.exps, want) {
			t.Errorf("expiries %v, want %v", got.exps, want)
		}
	})
}

// Order: the later record of a key wins, inside a commit and across
// commits; a deletion leaves a tombstone without an expiry entry; a purge
// removes the record and does not move the partition's sequence number; an
// expiration writes its tombstone (expired, keeping its expiration) and
// removes the expiry entry; the CAS never goes down.
func TestStorageOrdering(t *testing.T) {
	forEachStorage(t, func(t *testing.T, k storageKind) {
		st := k.open(t)
		key := docKey{key: "k"}
		v1 := testDoc(0, "k", 3, 1, 100, 50, `1`)
		v2 := testDoc(0, "k", 3, 2, 200, 60, `2`)
		mustCommit(t, st, put(v1, 0), put(v2, v1.Expiration))
		got := readAll(t, st)
		if st.durable() {
			if d := got.byKey[key]; d == nil || d.Seq != 2 {
				t.Fatalf("after two writes in one commit: %+v, want seq 2", d)
			}
			if want := []expItem{{exp: 60, key: key}}; !slices.Equal(got.exps, want) {
				t.Errorf("expiries %v, want %v", got.exps, want)
			}
		}
		if got.seqs[3] != 2 || got.meta.cas != 200 {
			t.Errorf("seq %d cas %d, want 2 and 200", got.seqs[3], got.meta.cas)
		}

		// An expiration, with an older CAS (a sliding extension keeps its
		// document's CAS), committed alone.
		exp := &Document{Key: "k", Partition: 3, Seq: 3, CAS: 150, RevSeq: 3, Deleted: true, Expired: true, Expiration: 60, DeletedAt: 61, Type: TypeJSON}
		if err := st.commitOne(put(exp, v2.Expiration)); err != nil {
			t.Fatal(err)
		}
		got = readAll(t, st)
		if got.seqs[3] != 3 || got.meta.cas != 200 {
			t.Errorf("after an expiration: seq %d cas %d, want 3 and 200", got.seqs[3], got.meta.cas)
		}
		if st.durable() {
			if d := got.byKey[key]; d == nil || !sameDoc(d, exp) {
				t.Errorf("after an expiration: %+v, want its tombstone %+v", d, exp)
			}
			if len(got.exps) != 0 {
				t.Errorf("an expiration's tombstone kept expiry entries %v", got.exps)
			}
		}

		del := &Document{Key: "k", Partition: 3, Seq: 4, CAS: 300, RevSeq: 4, Deleted: true, DeletedAt: 5}
		mustCommit(t, st, put(del, 0))
		got = readAll(t, st)
		if st.durable() {
			if d := got.byKey[key]; d == nil || !d.Deleted || d.Seq != 4 {
				t.Errorf("after a delete: %+v, want a tombstone at seq 4", d)
			}
			if len(got.exps) != 0 {
				t.Errorf("a tombstone kept expiry entries %v", got.exps)
			}
		}

		mustCommit(t, st, record{purge: true, key: key, part: 3, seq: 4})
		got = readAll(t, st)
		if len(got.docs) != 0 {
			t.Errorf("after a purge the store holds %v", docKeys(got.docs))
		}
		if _, err := st.doc(key); !errors.Is(err, ErrNotFound) {
			t.Errorf("doc after a purge: %v, want ErrNotFound", err)
		}
		if got.seqs[3] != 4 || got.meta.cas != 300 {
			t.Errorf("after a purge: seq %d cas %d, want 4 and 300", got.seqs[3], got.meta.cas)
		}
	})
}

// Commits that write a few keys many times each, as a backlog at
// durability none does (sets, deletes, expirations that change, purges of
// tombstones, in one commit): what the store holds afterwards, and after a
// reopen, is what applying every record in order makes of it, documents,
// expiry entries and sequence numbers alike. A pebble store leaves a key's
// superseded versions out of the commit's batch (supersededLocked).
func TestStorageRepeatedKeysInACommit(t *testing.T) {
	forEachStorage(t, func(t *testing.T, k storageKind) {
		if k.reopen == nil {
			t.Skip("keeps no documents")
		}
		st := k.open(t)
		rng := rand.New(rand.NewPCG(3, 9))
		const keys, parts = 12, 4
		docs := map[docKey]*Document{} // the model
		exps := map[expItem]bool{}
		seqs := map[uint16]uint64{}
		var cas uint64
		for c := range 40 {
			recs := make([]record, 0, 30)
			for range 1 + rng.IntN(30) {
				key := docKey{cid: CollectionID(rng.IntN(2)), key: fmt.Sprintf("k%d", rng.IntN(keys))}
				part := uint16(len(key.key)+int(key.cid)) % parts
				cur := docs[key]
				var r record
				if cur != nil && cur.Deleted && rng.IntN(3) == 0 {
					r = record{purge: true, key: key, part: part, seq: cur.Seq}
				} else {
					seqs[part]++
					cas++
					d := testDoc(key.cid, key.key, part, seqs[part], cas, 0, fmt.Sprintf(`{"c":%d}`, c))
					switch rng.IntN(4) {
					case 0:
						d.Deleted, d.DeletedAt, d.Value = true, 7, nil
					case 1:
						d.Expiration = 1_000 + int64(rng.IntN(5))
					}
					r = put(d, 0)
					if cur != nil && !cur.Deleted {
						r.oldExp = cur.Expiration
					}
				}
				recs = append(recs, r)
				// The model: the record applied alone.
				if r.purge {
					delete(docs, key)
				} else {
					docs[key] = r.doc
				}
				if newExp := r.newExp(); r.oldExp != newExp {
					delete(exps, expItem{exp: r.oldExp, key: key})
					if newExp != 0 {
						exps[expItem{exp: newExp, key: key}] = true
					}
				}
			}
			mustCommit(t, st, recs...)
		}
		check := func(when string, st storage) {
			got := readAll(t, st)
			if len(got.docs) != len(docs) {
				t.Errorf("%s: %d documents, want %d", when, len(got.docs), len(docs))
			}
			for key, d := range docs {
				if g := got.byKey[key]; g == nil || !sameDoc(g, d) {
					t.Errorf("%s: %v holds %+v, want %+v", when, key, g, d)
				}
			}
			gotExps := map[expItem]bool{}
			for _, it := range got.exps {
				gotExps[expItem{exp: it.exp, key: it.key}] = true
			}
			if !maps.Equal(gotExps, exps) {
				t.Errorf("%s: expiry entries %v, want %v", when, gotExps, exps)
			}
			if !maps.Equal(got.seqs, seqs) || got.meta.cas != cas {
				t.Errorf("%s: seqnos %v cas %d, want %v and %d", when, got.seqs, got.meta.cas, seqs, cas)
			}
		}
		check("after the commits", st)
		check("after a reopen", k.reopen(t, st, true))
	})
}

// Metadata written is metadata read: system documents, consumers, the
// failover log and the clean-close marker, which begin removes and a clean
// close sets; a durable store keeps all of it, and its documents, across a
// reopen.
func TestStorageMetadataRoundTrip(t *testing.T) {
	forEachStorage(t, func(t *testing.T, k storageKind) {
		st := k.open(t)
		hist := []FailoverEntry{{UUID: 7, Seqs: []uint64{1, 2}, CAS: 8}, {UUID: 3}}
		steps := []error{
			st.putSys("_design/a", []byte(`{"a":1}`)),
			st.putSys("_design/b", []byte(`{"b":1}`)),
			st.putSys("_design/b", nil),
			st.putConsumers([]string{"x", "y"}),
			st.putConsumers([]string{"y"}),
			st.begin(hist),
		}
		for i, err := range steps {
			if err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
		}
		mustCommit(t, st, put(testDoc(0, "d", 0, 1, 9, 0, `{}`), 0))
		check := func(when string, st storage, clean bool) {
			t.Helper()
			m := readAll(t, st).meta
			if !maps.EqualFunc(m.sys, map[string][]byte{"_design/a": []byte(`{"a":1}`)}, func(a, b []byte) bool { return string(a) == string(b) }) {
				t.Errorf("%s: system documents %v", when, m.sys)
			}
			if !slices.Equal(m.consumers, []string{"y"}) {
				t.Errorf("%s: consumers %v, want [y]", when, m.consumers)
			}
			if !slices.EqualFunc(m.history, hist, func(a, b FailoverEntry) bool {
				return a.UUID == b.UUID && slices.Equal(a.Seqs, b.Seqs) && a.CAS == b.CAS
			}) {
				t.Errorf("%s: failover log %v, want %v", when, m.history, hist)
			}
			if m.clean != clean {
				t.Errorf("%s: clean %v, want %v", when, m.clean, clean)
			}
			if m.cas != 9 {
				t.Errorf("%s: cas %d, want 9", when, m.cas)
			}
		}
		check("open", st, false)
		if k.reopen == nil {
			return
		}
		st = k.reopen(t, st, true)
		check("after a clean close", st, true)
		if d, err := st.doc(docKey{key: "d"}); err != nil || d.Seq != 1 {
			t.Errorf("document after reopen: %+v, %v", d, err)
		}
		if seqs, _ := st.seqnos(); seqs[0] != 1 {
			t.Errorf("seqnos after reopen %v", seqs)
		}
		if err := st.begin(hist); err != nil {
			t.Fatal(err)
		}
		check("after begin", st, false)
		st = k.reopen(t, st, false)
		check("after a close that was not clean", st, false)
	})
}

// raiseCAS raises the stored CAS, never lowers it, and a commit of a lower
// CAS leaves it: a clean close records the highest CAS the bucket handed
// out (a document lock's too), which the bucket opens at.
func TestStorageRaiseCAS(t *testing.T) {
	forEachStorage(t, func(t *testing.T, k storageKind) {
		st := k.open(t)
		mustCommit(t, st, put(testDoc(0, "d", 0, 1, 9, 0, `{}`), 0))
		cas := func(when string, want uint64) {
			t.Helper()
			if m := readAll(t, st).meta; m.cas != want {
				t.Errorf("%s: cas %d, want %d", when, m.cas, want)
			}
		}
		for _, step := range []struct {
			raise, want uint64
		}{{5, 9}, {20, 20}, {20, 20}} {
			if err := st.raiseCAS(step.raise); err != nil {
				t.Fatal(err)
			}
			cas(fmt.Sprintf("raised to %d", step.raise), step.want)
		}
		mustCommit(t, st, put(testDoc(0, "e", 0, 2, 15, 0, `{}`), 0))
		cas("after a commit of a lower CAS", 20)
		if k.reopen == nil {
			return
		}
		st = k.reopen(t, st, true)
		cas("after a clean close", 20)
	})
}

// faultyNoneBucket opens an engine with o (4 partitions and NoSync if
// unset) and a couchbase bucket "b" at durability none whose store is a
// faultyStorage, probed again every millisecond once it fails. The engine
// closes with the test.
func faultyNoneBucket(ctx context.Context, t *testing.T, o Options) (*Bucket, *faultyStorage) {
	t.Helper()
	if o.NumPartitions == 0 {
		o.NumPartitions = 4
	}
	o.NoSync = true
	eng, err := Open(t.TempDir(), &o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	bs := DefaultBucketSettings("b")
	bs.DurabilityMinLevel = DurabilityNone
	b, err := eng.CreateBucket(ctx, bs)
	if err != nil {
		t.Fatal(err)
	}
	f := &faultyStorage{storage: b.store.st}
	b.store.st = f
	b.store.probeGap = time.Millisecond
	return b, f
}

// faultyStorage fails commits and probes with err while it is set.
type faultyStorage struct {
	storage
	mu  sync.Mutex
	err error
}

func (f *faultyStorage) setErr(err error) {
	f.mu.Lock()
	f.err = err
	f.mu.Unlock()
}

func (f *faultyStorage) fault() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

func (f *faultyStorage) commit(recs []record) error {
	if err := f.fault(); err != nil {
		return err
	}
	return f.storage.commit(recs)
}

func (f *faultyStorage) commitOne(r record) error {
	if err := f.fault(); err != nil {
		return err
	}
	return f.storage.commitOne(r)
}

func (f *faultyStorage) probe() error {
	if err := f.fault(); err != nil {
		return err
	}
	return f.storage.probe()
}

// committedLog records what the store published, in order.
type committedLog struct {
	mu    sync.Mutex
	seqs  []uint64
	fails int
}

func (l *committedLog) onCommit(recs []record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range recs {
		l.seqs = append(l.seqs, r.seq)
	}
}

func (l *committedLog) onFail() {
	l.mu.Lock()
	l.fails++
	l.mu.Unlock()
}

// A commit's failure reaches the writer as an error wrapping ErrStorage and
// the cause; nothing of it is published or stored. A queued store then
// refuses writes until its probe succeeds; an inline store fails that write
// only.
func TestStoreCommitFailure(t *testing.T) {
	forEachStorage(t, func(t *testing.T, k storageKind) {
		ctx := context.Background()
		f := &faultyStorage{storage: k.open(t)}
		var log committedLog
		var logs logtest.Buffer
		s := newStore(f, &Options{MaxBatchSize: 100, Logger: logs.Logger()}, log.onCommit, log.onFail)
		s.probeGap = time.Millisecond
		defer s.close()
		key := docKey{key: "k"}
		write := func(seq uint64) error {
			cb, err := s.enqueue(put(testDoc(0, "k", 0, seq, seq, 0, `{}`), 0))
			if err != nil {
				return err
			}
			return cb.wait(ctx)
		}
		if err := write(1); err != nil {
			t.Fatal(err)
		}
		cause := errors.New("device on fire")
		f.setErr(cause)
		err := write(2)
		if !errors.Is(err, ErrStorage) || !errors.Is(err, cause) {
			t.Fatalf("failed commit: %v, want ErrStorage wrapping the cause", err)
		}
		if n := s.commitFailed.Load(); n != 1 {
			t.Errorf("commits failed %d, want 1", n)
		}
		if seqs, _ := f.seqnos(); seqs[0] != 1 {
			t.Errorf("a failed commit moved the stored sequence number to %d", seqs[0])
		}
		if f.durable() {
			if d, err := f.doc(key); err != nil || d.Seq != 1 {
				t.Errorf("stored document after a failed commit: %+v, %v", d, err)
			}
		}
		if !f.durable() {
			// Inline: only that write failed; the next one goes through.
			if s.failure() != nil {
				t.Errorf("an inline store refuses writes after one failure: %v", s.failure())
			}
			f.setErr(nil)
			if err := write(3); err != nil {
				t.Fatalf("write after the fault cleared: %v", err)
			}
		} else {
			if err := write(3); !errors.Is(err, ErrStorage) {
				t.Errorf("write on a failed store: %v, want ErrStorage", err)
			}
			if log.fails != 1 {
				t.Errorf("onFail ran %d times, want 1", log.fails)
			}

			f.setErr(nil)
			deadline := time.Now().Add(time.Minute)
			for s.failure() != nil {
				if time.Now().After(deadline) {
					t.Fatal("the probe never let writes in again")
				}
				time.Sleep(time.Millisecond)
			}
			if err := write(3); err != nil {
				t.Fatalf("write after the probe succeeded: %v", err)
			}
			// The failure is logged before the probe starts.
			if n := len(logs.Records(t, "commit failed: writes are refused until the disk takes writes again; reads go on")); n != 1 {
				t.Errorf("%d error lines for one failed commit, want 1", n)
			}
			if d, err := f.doc(key); err != nil || d.Seq != 3 {
				t.Errorf("stored document after recovery: %+v, %v", d, err)
			}
		}
		if seqs, _ := f.seqnos(); seqs[0] != 3 {
			t.Errorf("stored sequence number %d, want 3", seqs[0])
		}
		if f.durable() {
			// The flusher publishes what it committed, in order; an inline
			// store leaves publishing to the writer.
			log.mu.Lock()
			defer log.mu.Unlock()
			if !slices.Equal(log.seqs, []uint64{1, 3}) {
				t.Errorf("published %v, want [1 3]", log.seqs)
			}
		}
	})
}

// Group commit keeps the order in which records were queued: many writes of
// one key from one writer, and Sync's batch (last) is committed after every
// one of them.
func TestStoreKeepsQueueOrder(t *testing.T) {
	forEachStorage(t, func(t *testing.T, k storageKind) {
		st := k.open(t)
		var log committedLog
		s := newStore(st, &Options{MaxBatchSize: 7, Logger: slog.New(slog.DiscardHandler)}, log.onCommit, log.onFail)
		defer s.close()
		const n = 200
		for seq := uint64(1); seq <= n; seq++ {
			if _, err := s.enqueue(put(testDoc(0, "k", 0, seq, seq, int64(seq), `{}`), int64(seq-1))); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.last().wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		if s.pending() != 0 {
			t.Errorf("%d records pending after the last batch committed", s.pending())
		}
		got := readAll(t, st)
		if got.seqs[0] != n || got.meta.cas != n {
			t.Errorf("seq %d cas %d, want %d", got.seqs[0], got.meta.cas, n)
		}
		if st.durable() {
			if d := got.byKey[docKey{key: "k"}]; d == nil || d.Seq != n {
				t.Errorf("stored %+v, want seq %d", d, n)
			}
			if want := []expItem{{exp: n, key: docKey{key: "k"}}}; !slices.Equal(got.exps, want) {
				t.Errorf("expiries %v, want %v", got.exps, want)
			}
			log.mu.Lock()
			defer log.mu.Unlock()
			if len(log.seqs) != n || !slices.IsSorted(log.seqs) {
				t.Errorf("published %d records, sorted %v", len(log.seqs), slices.IsSorted(log.seqs))
			}
		}
	})
}

// The catalog keeps bucket definitions across a reopen; a removed one is
// gone.
func TestBoltCatalogRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.db")
	cat, err := openBoltCatalog(path)
	if err != nil {
		t.Fatal(err)
	}
	a := catalogEntry{Settings: DefaultBucketSettings("a"), NextCID: 9, Parts: 4,
		Scopes: map[string]map[string]collectionInfo{"_default": {"_default": {}}, "s": {"c": {ID: 8, MaxTTL: 5}}}}
	b := catalogEntry{Settings: DefaultBucketSettings("b"), NextCID: 8, Parts: 4}
	for _, ce := range []catalogEntry{a, b} {
		if err := cat.put(ce); err != nil {
			t.Fatal(err)
		}
	}
	a.Settings.MaxTTL = 60
	if err := cat.put(a); err != nil {
		t.Fatal(err)
	}
	if err := cat.remove("b"); err != nil {
		t.Fatal(err)
	}
	if err := cat.close(); err != nil {
		t.Fatal(err)
	}
	cat, err = openBoltCatalog(path)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.close()
	got, err := cat.entries()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Settings != a.Settings || got[0].NextCID != 9 || got[0].Scopes["s"]["c"] != a.Scopes["s"]["c"] {
		t.Errorf("catalog after reopen: %+v, want only %+v", got, a)
	}
}

// collectKeys pulls every key of st.keys(cid, r).
func collectKeys(t *testing.T, st storage, cid CollectionID, r keyRange) []string {
	t.Helper()
	var out []string
	for k, err := range st.keys(cid, r) {
		if err != nil {
			t.Fatalf("keys: %v", err)
		}
		out = append(out, k)
	}
	return out
}

// keys: a collection's stored keys (tombstones included) in byte order or
// its reverse, within open or closed bounds, never another collection's,
// across the chunks a scan reads in; a memory store yields none.
func TestStorageKeys(t *testing.T) {
	forEachStorage(t, func(t *testing.T, k storageKind) {
		st := k.open(t)
		var recs []record
		var all []string // collection 8's keys, sorted
		for i := range 300 {
			key := fmt.Sprintf("k%03d", i)
			all = append(all, key)
			recs = append(recs, put(testDoc(8, key, uint16(i%4), uint64(i+1), uint64(i+1), 0, `1`), 0))
		}
		// Neighbours on both sides, and a tombstone in the collection.
		recs = append(recs, put(testDoc(7, "k100", 0, 400, 400, 0, `1`), 0), put(testDoc(9, "a", 0, 401, 401, 0, `1`), 0),
			put(testDoc(math.MaxUint32, "z", 0, 402, 402, 0, `1`), 0))
		mustCommit(t, st, recs...)
		mustCommit(t, st, put(&Document{Key: "k150", Collection: 8, Partition: 2, Seq: 500, CAS: 500, RevSeq: 2, Deleted: true, DeletedAt: 1}, 0))
		if !st.durable() {
			if got := collectKeys(t, st, 8, keyRange{}); len(got) != 0 {
				t.Errorf("a memory store yielded keys %v", got)
			}
			return
		}
		rev := slices.Clone(all)
		slices.Reverse(rev)
		for _, c := range []struct {
			name string
			r    keyRange
			want []string
		}{
			{"all", keyRange{}, all},
			{"all, descending", keyRange{desc: true}, rev},
			{"from k100", keyRange{lo: "k100"}, all[100:]},
			{"after k100", keyRange{lo: "k100", loOpen: true}, all[101:]},
			{"between a gap", keyRange{lo: "k0995"}, all[100:]},
			{"k100..k200", keyRange{lo: "k100", hi: "k200", hasHi: true}, all[100:201]},
			{"k100..k200, open", keyRange{lo: "k100", loOpen: true, hi: "k200", hiOpen: true, hasHi: true}, all[101:200]},
			{"k200..k100 descending", keyRange{lo: "k100", hi: "k200", hasHi: true, desc: true}, rev[99:200]},
			{"k200..k100 descending, open", keyRange{lo: "k100", loOpen: true, hi: "k200", hiOpen: true, hasHi: true, desc: true}, rev[100:199]},
			{"up to a gap, descending", keyRange{hi: "k1005", hasHi: true, desc: true}, rev[199:]},
			{"past the end", keyRange{lo: "l"}, nil},
			{"past the end, descending", keyRange{lo: "l", desc: true}, nil},
			{"before the start, descending", keyRange{hi: "a", hasHi: true, desc: true}, nil},
			{"empty (lo above hi)", keyRange{lo: "k2", hi: "k1", hasHi: true}, nil},
		} {
			if got := collectKeys(t, st, 8, c.r); !slices.Equal(got, c.want) {
				t.Errorf("%s: got %d keys %v…, want %d %v…", c.name, len(got), head(got), len(c.want), head(c.want))
			}
		}
		if got := collectKeys(t, st, math.MaxUint32, keyRange{desc: true}); !slices.Equal(got, []string{"z"}) {
			t.Errorf("the last collection ID, descending: %v", got)
		}
		if got := collectKeys(t, st, 3, keyRange{}); len(got) != 0 {
			t.Errorf("a collection with no keys: %v", got)
		}

		// A scan stops reading when its caller stops pulling.
		keysRead := map[string]func() int64{
			"bolt":   func() int64 { return st.(*boltStorage).keysRead.Load() },
			"pebble": func() int64 { return st.(*pebbleStorage).keysRead.Load() },
		}[k.name]
		before := keysRead()
		n := 0
		for range st.keys(8, keyRange{}) {
			if n++; n == 3 {
				break
			}
		}
		if read := keysRead() - before; read > keysFirstChunk {
			t.Errorf("3 keys pulled read %d rows, want at most one chunk (%d)", read, keysFirstChunk)
		}
	})
}

func head(s []string) []string { return s[:min(len(s), 3)] }

// keys read while commits go on: every key present throughout is yielded
// once, in order, whatever the writes around it (added keys, removed ones).
func TestStorageKeysWhileWriting(t *testing.T) {
	forEachStorage(t, func(t *testing.T, k storageKind) {
		st := k.open(t)
		if !st.durable() {
			t.Skip("a memory store yields no keys")
		}
		var recs []record
		for i := range 2000 {
			recs = append(recs, put(testDoc(0, fmt.Sprintf("s%05d", 2*i), 0, uint64(i+1), uint64(i+1), 0, `1`), 0))
		}
		mustCommit(t, st, recs...)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				// Odd keys come and go; even ones stay.
				key := docKey{key: fmt.Sprintf("s%05d", 2*(i%2000)+1)}
				seq := uint64(10000 + i)
				r := record{purge: true, key: key, part: 0, seq: seq}
				if i%2 == 0 {
					r = put(testDoc(0, key.key, 0, seq, seq, 0, `1`), 0)
				}
				if err := st.commit([]record{r}); err != nil {
					t.Errorf("commit: %v", err)
					return
				}
			}
		}()
		for _, desc := range []bool{false, true} {
			got := collectKeys(t, st, 0, keyRange{desc: desc})
			var even []string
			for i, key := range got {
				if i > 0 && (!desc && key <= got[i-1] || desc && key >= got[i-1]) {
					t.Fatalf("desc=%v: %q after %q", desc, key, got[i-1])
				}
				if key[len(key)-1]%2 == 0 {
					even = append(even, key)
				}
			}
			if len(even) != 2000 {
				t.Errorf("desc=%v: %d of the 2000 keys present throughout", desc, len(even))
			}
		}
		close(stop)
		wg.Wait()
	})
}

// docs reads many keys in one pass: each stored key at its stored version
// (a tombstone too), nil for a key the store does not hold (before the
// first stored key, in a gap, past the last, in another collection), a
// repeated key each time; the same answers as doc, key by key.
func TestStorageDocs(t *testing.T) {
	forEachStorage(t, func(t *testing.T, k storageKind) {
		st := k.open(t)
		if got, err := st.docs(nil); err != nil || len(got) != 0 {
			t.Fatalf("docs of no keys: %v, %v", got, err)
		}
		var recs []record
		for i := range 200 {
			recs = append(recs, put(testDoc(8, fmt.Sprintf("k%03d", 2*i), uint16(i%4), uint64(i+1), uint64(i+1), 0, fmt.Sprintf(`{"i":%d}`, i)), 0))
		}
		recs = append(recs, put(testDoc(7, "k100", 0, 400, 400, 0, `"seven"`), 0), put(testDoc(9, "a", 0, 401, 401, 0, `"nine"`), 0))
		mustCommit(t, st, recs...)
		mustCommit(t, st, put(&Document{Key: "k150", Collection: 8, Partition: 2, Seq: 500, CAS: 500, RevSeq: 2, Deleted: true, DeletedAt: 1}, 0))

		keys := []docKey{
			{cid: 7, key: "k100"}, {cid: 7, key: "k101"}, // a stored key of another collection; one not stored
			{cid: 8, key: "a"}, // before collection 8's first key
			{cid: 8, key: "k000"}, {cid: 8, key: "k001"}, {cid: 8, key: "k002"}, {cid: 8, key: "k002"},
			{cid: 8, key: "k150"}, // the tombstone
			{cid: 8, key: "k151"}, {cid: 8, key: "k398"}, {cid: 8, key: "k399"},
			{cid: 9, key: "a"}, {cid: 9, key: "b"}, {cid: 10, key: "a"}, // past the last key
		}
		if !slices.IsSortedFunc(keys, compareDocKeys) {
			t.Fatal("the test's keys are not in store order")
		}
		got, err := st.docs(keys)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(keys) {
			t.Fatalf("docs of %d keys returned %d", len(keys), len(got))
		}
		found := 0
		for i, key := range keys {
			want, err := st.doc(key)
			switch {
			case errors.Is(err, ErrNotFound):
				if got[i] != nil {
					t.Errorf("docs: %d/%s = %+v, doc finds none", key.cid, key.key, got[i])
				}
			case err != nil:
				t.Fatal(err)
			case got[i] == nil || !sameDoc(got[i], want):
				t.Errorf("docs: %d/%s = %+v, doc finds %+v", key.cid, key.key, got[i], want)
			default:
				found++
			}
		}
		if want := map[bool]int{true: 7, false: 0}[st.durable()]; found != want {
			t.Errorf("docs found %d stored keys, want %d", found, want)
		}
	})
}
