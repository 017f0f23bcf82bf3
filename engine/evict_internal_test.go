package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/internal/racebuild"
)

// keepFilters gives a warm bucket the Bloom filters a fullEviction bucket
// keeps (a valueOnly bucket frees them once warm), built from its store's
// keys, so that its items may leave memory whole (evictItemLocked).
func keepFilters(ctx context.Context, t *testing.T, b *Bucket) {
	t.Helper()
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	b.installBloom()
	b.bloom.ready.Store(false)
	if err := b.loadBloom(ctx, b.store.st); err != nil {
		t.Fatal(err)
	}
}

// evictItems takes out of memory whole every item of b that evict
// picks and that can leave (its version on disk); it returns how many left.
func evictItems(b *Bucket, evict func(key string) bool) int {
	n := 0
	low := b.consumedUpTo() // tombstones every consumer read may leave too
	b.mem.tombsLow.Store(&low)
	for _, p := range b.parts {
		p.mu.Lock()
		var slots []uint32
		p.mu.docs.each(func(i uint32) bool {
			if evict(p.mu.docs.keyOf(i)) {
				slots = append(slots, i)
			}
			return true
		})
		for _, i := range slots {
			if b.evictItemLocked(p, i) {
				n++
			}
		}
		p.mu.Unlock()
	}
	return n
}

// shrink compacts b's sparse tables (shrinkTables), as an eviction pass
// does after it, and checks the LRU queue against the records (queueOK).
func shrink(t *testing.T, b *Bucket) int {
	t.Helper()
	b.mem.evicting.Lock()
	n := b.shrinkTables()
	b.mem.evicting.Unlock()
	queueOK(t, b)
	return n
}

// queueOK checks b's LRU queue against its records: every entry names a
// record that is queued (in use with recQueued, or removed while queued),
// each such record once, and every queued record has its entry.
func queueOK(t *testing.T, b *Bucket) {
	t.Helper()
	m := &b.mem
	m.lru.Lock()
	q := slices.Clone(m.lru.q[m.lru.head:])
	m.lru.Unlock()
	seen := map[uint32]bool{}
	for _, e := range q {
		part, slot := m.splitEntry(e)
		p := b.parts[part]
		p.mu.RLock()
		ok := int(slot) < len(p.mu.docs.recs) && p.mu.docs.recs[slot].bits()&recQueued != 0
		p.mu.RUnlock()
		if !ok || seen[e] {
			t.Fatalf("LRU queue entry of partition %d record %d: queued %v, seen before %v", part, slot, ok, seen[e])
		}
		seen[e] = true
	}
	for _, p := range b.parts {
		p.mu.RLock()
		for i := range p.mu.docs.recs {
			if p.mu.docs.recs[i].bits()&recQueued != 0 {
				if e, _ := m.queueEntry(p.id, uint32(i)); !seen[e] {
					t.Errorf("partition %d record %d is queued, the queue has no entry for it", p.id, i)
				}
			}
		}
		p.mu.RUnlock()
	}
	if t.Failed() {
		t.FailNow()
	}
}

// inMemory counts the live documents and tombstones b's tables hold.
func inMemory(b *Bucket) (live, tombs int) {
	for _, p := range b.parts {
		p.mu.RLock()
		p.mu.docs.each(func(i uint32) bool {
			if p.mu.docs.recs[i].bits()&recDeleted != 0 {
				tombs++
			} else {
				live++
			}
			return true
		})
		p.mu.RUnlock()
	}
	return live, tombs
}

// modelDoc is what the model holds of a live document.
type modelDoc struct {
	value string
	cas   uint64
	exp   int64
}

// feedOf reads the whole change feed with a new cursor, limit documents
// at a time, and returns the live documents' values and the deleted keys.
func feedOf(t *testing.T, b *Bucket, limit int) (map[string]string, map[string]bool) {
	t.Helper()
	cur, err := b.Consumer("model").Changes(nil)
	if err != nil {
		t.Fatal(err)
	}
	live, deleted := map[string]string{}, map[string]bool{}
	for {
		got := 0
		for d := range cur.Next(limit) {
			got++
			if _, dup := live[d.Key]; dup || deleted[d.Key] {
				t.Fatalf("the feed yields %q twice", d.Key)
			}
			if d.Deleted {
				deleted[d.Key] = true
			} else {
				live[d.Key] = string(d.Value)
			}
		}
		if err := cur.Err(); err != nil {
			t.Fatal(err)
		}
		if got < limit {
			return live, deleted
		}
	}
}

// feedKey names d's key in its collection.
func feedKey(d *Document) string { return fmt.Sprintf("%d/%s", d.Collection, d.Key) }

// changesOf reads Bucket.Changes after since, limit documents a call, to
// its end, and returns the documents read by feedKey; in a bucket that nothing
// changes meanwhile each comes exactly once (a backfill's snapshot and the
// log after it do not overlap).
func changesOf(t *testing.T, b *Bucket, since []uint64, limit int) map[string]*Document {
	t.Helper()
	got := map[string]*Document{}
	for {
		docs, next, err := b.Changes(since, limit)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range docs {
			k := feedKey(d)
			if _, dup := got[k]; dup {
				t.Fatalf("Changes yields %q twice", k)
			}
			got[k] = d
		}
		if slices.Equal(next, since) {
			return got
		}
		since = next
	}
}

// scanOf reads every partition's changes with lo < CAS <= StableCAS through
// ScanChanges, limit a read, as package changes does, and returns them by
// feedKey; each comes exactly once when nothing changes meanwhile. Each
// partition's third read starts a new scan from where the second left After
// (a reader that resumes from a position mid-partition): inside a backfill
// that is where it began, so the backfill is read again and keys may repeat
// there only.
func scanOf(t *testing.T, b *Bucket, lo uint64, limit int) map[string]*Document {
	t.Helper()
	hi := b.StableCAS()
	got := map[string]*Document{}
	for part := range b.NumPartitions() {
		s := ChangeScan{Part: part, Lo: lo, Hi: hi, Limit: limit, More: true}
		for reads := 0; s.More; reads++ {
			if reads == 2 {
				s = ChangeScan{Part: part, After: s.After, Lo: lo, Hi: hi, Limit: limit}
			}
			s.Docs = s.Docs[:0]
			b.ScanChanges(&s)
			if s.Err != nil {
				t.Fatal(s.Err)
			}
			for _, d := range s.Docs {
				k := feedKey(d)
				if old, dup := got[k]; dup && !(s.Backfill && old.Seq == d.Seq) {
					t.Fatalf("ScanChanges yields %q twice (seq %d, then %d; backfill %v)", k, old.Seq, d.Seq, s.Backfill)
				}
				got[k] = d
			}
		}
	}
	return got
}

// deletedIn returns the keys of docs' tombstones.
func deletedIn(docs map[string]*Document) []string {
	var out []string
	for k, d := range docs {
		if d.Deleted {
			out = append(out, k)
		}
	}
	return out
}

// sameDocs fails unless got and want hold the same keys at the same versions.
func sameDocs(t *testing.T, what string, got, want map[string]*Document) {
	t.Helper()
	for k, w := range want {
		g, ok := got[k]
		if !ok || g.Seq != w.Seq || g.CAS != w.CAS || g.Deleted != w.Deleted || string(g.Value) != string(w.Value) {
			t.Fatalf("%s: %q is %+v, want %+v", what, k, g, w)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Fatalf("%s: %q is not expected", what, k)
		}
	}
}

// Items out of memory whole (fullEviction) keep every answer: a model test
// of random sets, adds, replaces with right and stale CAS, deletes, gets,
// touches, expirations (the injected clock, the pager) and restarts (clean, and
// from a copy of the files of the open store, as kill -9 leaves them) on a
// bucket whose items leave memory whole between steps, against a map: the
// answers match, a new change-feed consumer (a view built after the
// eviction) sees every document at its latest version once, curr_items
// counts every live document, and Check holds (its counts include the
// documents out of memory). Each store.
func TestEvictedItemsModel(t *testing.T) {
	steps := racebuild.Scale(3000) // the flusher's and evictor's goroutines: a shorter run under -race too
	for _, kind := range []string{StoragePebble, StorageBolt} {
		t.Run(kind, func(t *testing.T) { evictedItemsModel(t, kind, false, steps) })
		t.Run(kind+"/quota", func(t *testing.T) { evictedItemsModel(t, kind, true, steps) })
	}
}

// evictedItemsModel is TestEvictedItemsModel on one store, for steps
// random operations: with quota, on a fullEviction bucket of 1 MiB whose
// 3 KB documents leave memory by its own eviction; else on a bucket whose
// items the test takes out.
func evictedItemsModel(t *testing.T, kind string, quota bool, steps int) {
	{
		{
			ctx, cancel := context.WithCancel(t.Context()) // no deadline: under -race on a busy machine a subtest took 5 min; go test -timeout catches a hang
			defer cancel()
			dir := t.TempDir()
			clk := NewFakeClock(1_700_000_000)
			var reads *countingDocReads // the open store's reads by key
			open := func() (*Engine, *Bucket) {
				// (Synced commits: a copy of the files after Sync holds them.)
				eng, err := Open(dir, &Options{Clock: clk, NumPartitions: 8, Storage: kind,
					wrapStorage: func(st storage) storage {
						reads = &countingDocReads{storage: st}
						return reads
					}})
				if err != nil {
					t.Fatal(err)
				}
				b, err := eng.Bucket("b")
				if errors.Is(err, ErrBucketNotFound) {
					s := DefaultBucketSettings("b")
					if quota {
						s.EvictionPolicy, s.RAMQuotaMB = FullEviction, 1
					}
					b, err = eng.CreateBucket(ctx, s)
				}
				if err != nil {
					t.Fatal(err)
				}
				if !quota {
					keepFilters(ctx, t, b)
				}
				return eng, b
			}
			eng, b := open()
			defer func() { eng.Close() }()
			rng := rand.New(rand.NewPCG(7, uint64(len(kind))))
			model := map[string]modelDoc{}
			keys, pad := 120, ""
			if quota {
				keys, pad = 600, strings.Repeat("x", 3000)
			}
			var outMax int64     // the most documents seen out of memory whole
			var tombsOutMax int  // the most tombstones seen out of memory whole
			restarts := 0        // restarts whose warm-up loaded no item
			shrunk := 0          // tables compacted (shrinkTables; with quota, since the last restart)
			var midSeqs []uint64 // the feed's position at the last eviction
			var midCAS uint64
			changesChecked := 0
			check := func(when string) {
				t.Helper()
				if err := b.Check(ctx); err != nil {
					t.Fatalf("%s: %v", when, err)
				}
				if n := b.Stats().CurrItems; n != int64(len(model)) {
					t.Fatalf("%s: curr_items %d, the model holds %d", when, n, len(model))
				}
			}
			c := b.DefaultCollection()
			for step := range steps {
				key := fmt.Sprint("k", rng.IntN(keys))
				now := clk.Now()
				md, ok := model[key]
				if ok && md.exp != 0 && md.exp <= now {
					// Due: the next access expires it (any op below).
					ok = false
				}
				val := fmt.Sprintf(`{"s":%d,"p":"%s"}`, step, pad)
				outMax = max(outMax, b.mem.out.Load())
				if step%20 == 0 {
					_, tombs := inMemory(b)
					tombsOutMax = max(tombsOutMax, int(b.tombs.Load())-tombs)
				}
				var exp int64
				if rng.IntN(4) == 0 {
					exp = now + int64(1+rng.IntN(30))
				}
				switch op := rng.IntN(100); {
				case op < 25:
					d, err := c.Upsert(ctx, key, []byte(val), &WriteOptions{Expiry: exp})
					if err != nil {
						t.Fatalf("step %d: upsert %s: %v", step, key, err)
					}
					model[key] = modelDoc{val, d.CAS, exp}
				case op < 35:
					d, err := c.Insert(ctx, key, []byte(val), &WriteOptions{Expiry: exp})
					switch {
					case ok && !errors.Is(err, ErrKeyExists):
						t.Fatalf("step %d: insert of existing %s: %v", step, key, err)
					case !ok && err != nil:
						t.Fatalf("step %d: insert %s: %v", step, key, err)
					case !ok:
						model[key] = modelDoc{val, d.CAS, exp}
					}
				case op < 50:
					cas := md.cas
					stale := rng.IntN(3) == 0
					if stale {
						cas++
					}
					d, err := c.Replace(ctx, key, []byte(val), &WriteOptions{CAS: cas, Expiry: exp})
					switch {
					case !ok && !errors.Is(err, ErrNotFound):
						t.Fatalf("step %d: replace of absent %s: %v", step, key, err)
					case ok && stale && !errors.Is(err, ErrCASMismatch):
						t.Fatalf("step %d: replace %s with a stale CAS: %v", step, key, err)
					case ok && !stale && err != nil:
						t.Fatalf("step %d: replace %s: %v", step, key, err)
					case ok && !stale:
						model[key] = modelDoc{val, d.CAS, exp}
					}
				case op < 60:
					_, err := c.Delete(ctx, key, nil)
					if ok != (err == nil) || (!ok && !errors.Is(err, ErrNotFound)) {
						t.Fatalf("step %d: delete %s (live %v): %v", step, key, ok, err)
					}
					delete(model, key)
				case op < 88:
					if rng.IntN(5) == 0 { // a key never written: the filter answers
						if _, err := c.Get(ctx, fmt.Sprint("never", step)); !errors.Is(err, ErrNotFound) {
							t.Fatalf("step %d: get of a key never written: %v", step, err)
						}
						break
					}
					d, err := c.Get(ctx, key)
					switch {
					case ok && (err != nil || string(d.Value) != md.value || d.CAS != md.cas || d.Expiration != md.exp):
						t.Fatalf("step %d: get %s = %v %+v, want %+v", step, key, err, d, md)
					case !ok && err == nil:
						t.Fatalf("step %d: get of absent %s = %+v", step, key, d)
					}
					if !ok {
						delete(model, key)
					}
				case op < 91:
					d, err := c.GetAndTouch(ctx, key, exp)
					switch {
					case ok && (err != nil || string(d.Value) != md.value):
						t.Fatalf("step %d: touch %s = %v %+v, want %+v", step, key, err, d, md)
					case !ok && err == nil:
						t.Fatalf("step %d: touch of absent %s = %+v", step, key, d)
					case ok:
						model[key] = modelDoc{md.value, d.CAS, exp}
					default:
						delete(model, key)
					}
				case op < 94:
					clk.Advance(int64(1 + rng.IntN(10)))
					if _, _, err := b.ExpireBatch(ctx, 1<<20); err != nil {
						t.Fatal(err)
					}
					if err := b.Sync(ctx); err != nil {
						t.Fatal(err)
					}
					for k, m := range model {
						if m.exp != 0 && m.exp <= clk.Now() {
							delete(model, k)
						}
					}
					check(fmt.Sprintf("step %d: after the pager", step))
				case op < 99:
					if err := b.Sync(ctx); err != nil {
						t.Fatal(err)
					}
					if quota {
						b.maybeEvict(ctx)
					} else {
						evictItems(b, func(string) bool { return rng.IntN(4) != 0 })
						shrunk += shrink(t, b)
					}
					queueOK(t, b)
					check(fmt.Sprintf("step %d: after an eviction", step))
					live, _ := feedOf(t, b, 1+rng.IntN(100))
					for k, m := range model {
						if m.exp == 0 || m.exp > clk.Now() {
							if live[k] != m.value {
								t.Fatalf("step %d: a new feed consumer reads %s as %q, want %q", step, k, live[k], m.value)
							}
						}
					}
					for k := range live {
						if _, ok := model[k]; !ok {
							t.Fatalf("step %d: a new feed consumer reads %s live, the model holds none", step, k)
						}
					}
					// The _changes readers (Bucket.Changes, ScanChanges) from
					// the start see what the consumer does, each key once at
					// its newest version; from a position saved at an
					// earlier eviction, exactly what changed after it.
					all := changesOf(t, b, nil, 1+rng.IntN(100))
					for _, d := range all {
						if !d.Deleted && live[d.Key] != string(d.Value) {
							t.Fatalf("step %d: Changes reads %s as %q, the consumer %q", step, d.Key, d.Value, live[d.Key])
						}
					}
					if n := len(all) - len(deletedIn(all)); n != len(live) {
						t.Fatalf("step %d: Changes reads %d live documents, the consumer %d", step, n, len(live))
					}
					sameDocs(t, fmt.Sprintf("step %d: ScanChanges from 0", step), scanOf(t, b, 0, 1+rng.IntN(50)), all)
					if midSeqs != nil {
						want := map[string]*Document{}
						wantCAS := map[string]*Document{}
						for k, d := range all {
							if d.Seq > midSeqs[d.Partition] {
								want[k] = d
							}
							if d.CAS > midCAS {
								wantCAS[k] = d
							}
						}
						sameDocs(t, fmt.Sprintf("step %d: Changes from a mid position", step), changesOf(t, b, midSeqs, 1+rng.IntN(100)), want)
						sameDocs(t, fmt.Sprintf("step %d: ScanChanges from a mid CAS", step), scanOf(t, b, midCAS, 1+rng.IntN(50)), wantCAS)
						changesChecked++
					}
					midSeqs, midCAS = b.HighSeqnos(), b.StableCAS()
					// A listing shows every live document, in key order.
					listed := map[string]string{}
					prev := ""
					for d, err := range c.List(ctx, ListOptions{}) {
						if err != nil {
							t.Fatalf("step %d: list: %v", step, err)
						}
						if d.Key <= prev {
							t.Fatalf("step %d: list: %q after %q", step, d.Key, prev)
						}
						prev, listed[d.Key] = d.Key, string(d.Value)
					}
					want := map[string]string{}
					for k, m := range model {
						if m.exp == 0 || m.exp > clk.Now() {
							want[k] = m.value
						}
					}
					if !maps.Equal(listed, want) {
						t.Fatalf("step %d: list shows %d documents, the model %d live: %v, want %v", step, len(listed), len(want), listed, want)
					}
				default:
					crash := rng.IntN(2) == 0
					if crash { // what kill -9 now would leave: a copy of the files of the open store
						if err := b.Sync(ctx); err != nil {
							t.Fatal(err)
						}
						crashed := t.TempDir()
						crashCopy(t, b, dir, crashed)
						dir = crashed
					}
					if err := eng.Close(); err != nil {
						t.Fatal(err)
					}
					eng, b = open()
					c = b.DefaultCollection()
					if quota { // fullEviction's warm-up loads no item: every one is out
						live, tombs := inMemory(b)
						st := b.Stats()
						if live+tombs != 0 || b.mem.out.Load() != st.CurrItems+b.tombs.Load() || st.NonResident != st.CurrItems {
							t.Fatalf("step %d: after a restart memory holds %d documents and %d tombstones; %d out of %d items and %d tombstones, %d non-resident",
								step, live, tombs, b.mem.out.Load(), st.CurrItems, b.tombs.Load(), st.NonResident)
						}
						restarts++
					}
					check(fmt.Sprintf("step %d: after a restart", step))
				}
			}
			if err := b.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			if changesChecked == 0 {
				t.Fatal("no _changes reader was checked from a mid position")
			}
			if quota {
				t.Logf("at most %d of %d documents out of memory whole; mem_used %d of a %d quota at the end", outMax, len(model), b.memUsed(), b.mem.quota.Load())
				if outMax == 0 {
					t.Fatal("no item left memory whole")
				}
				if restarts == 0 {
					t.Fatal("no restart")
				}
				shrunk = int(b.mem.shrinks.Load())
			}
			t.Logf("%d tables compacted", shrunk)
			if !quota && shrunk == 0 { // (a quota's resident set holds steady)
				t.Fatal("no table was compacted")
			}
			if evictItems(b, func(string) bool { return true }) == 0 {
				t.Fatal("nothing left memory")
			}
			shrink(t, b)
			for _, p := range b.parts {
				if n := len(p.mu.docs.recs); n >= shrinkMin {
					t.Fatalf("partition %d keeps %d records with every item out of memory", p.id, n)
				}
			}
			check("at the end, every item out of memory")
			if _, tombs := inMemory(b); tombs != 0 || b.tombs.Load() == 0 {
				t.Fatalf("at the end, %d of %d tombstones still in memory", tombs, b.tombs.Load())
			}
			t.Logf("at most %d tombstones out of memory whole during the steps", tombsOutMax)
			if quota && tombsOutMax == 0 {
				t.Fatal("no tombstone left memory whole during the steps")
			}
			if st := b.Stats(); st.NonResident != st.CurrItems {
				t.Fatalf("every item out of memory: ep_num_non_resident %d, curr_items %d", st.NonResident, st.CurrItems)
			}
			// A write with a CAS of a document out of memory reads its
			// metadata back (ep_bg_meta_fetched), and an insert over a
			// tombstone out of memory builds on it.
			for _, k := range slices.Sorted(maps.Keys(model)) {
				m := model[k]
				if m.exp != 0 && m.exp <= clk.Now() {
					continue
				}
				d, err := c.Replace(ctx, k, []byte(`{"end":1}`), &WriteOptions{CAS: m.cas})
				if err != nil {
					t.Fatalf("replace %s out of memory with its CAS: %v", k, err)
				}
				model[k] = modelDoc{`{"end":1}`, d.CAS, 0}
				break
			}
			for i := range keys {
				k := fmt.Sprint("k", i)
				tomb, err := c.Tombstone(k)
				if err != nil {
					continue
				}
				d, err := c.Insert(ctx, k, []byte(`{"back":1}`), nil)
				if err != nil || d.RevSeq != tomb.RevSeq+1 {
					t.Fatalf("insert over %s's tombstone out of memory (rev %d) = %+v, %v", k, tomb.RevSeq, d, err)
				}
				model[k] = modelDoc{`{"back":1}`, d.CAS, 0}
				break
			}
			// Every document read back from disk, and misses that read nothing.
			for k, m := range model {
				d, err := c.Get(ctx, k)
				if m.exp != 0 && m.exp <= clk.Now() {
					continue
				}
				if err != nil || string(d.Value) != m.value || d.CAS != m.cas {
					t.Fatalf("get %s out of memory = %v %+v, want %+v", k, err, d, m)
				}
			}
			before := reads.reads.Load()
			for i := range 50 {
				if _, err := c.Get(ctx, fmt.Sprint("never-", i)); !errors.Is(err, ErrNotFound) {
					t.Fatalf("get of a key never written: %v", err)
				}
			}
			// At 1% false positives, 50 misses read the store about once.
			if n := reads.reads.Load() - before; n > 10 {
				t.Fatalf("50 misses with every item out of memory read the store %d times", n)
			}
			check("at the end, read back")
			st := b.Stats()
			t.Logf("ep_bg_meta_fetched %d, ep_bfilter_negatives %d", st.Bloom.MetaFetched, st.Bloom.Negatives)
			if st.Bloom.MetaFetched == 0 || st.Bloom.Negatives == 0 {
				t.Fatalf("the model did not read items back from disk or miss through the filter: %+v", st.Bloom)
			}
		}
	}
}

// The passes over a bucket's keys — a TTL re-evaluation, a collection
// drop, Flush — reach the documents out of memory whole too, and leave the
// counts right (Check). Each fails if it walks memory's keys alone.
func TestEvictedItemsAdminPasses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	eng, err := Open(t.TempDir(), &Options{Clock: NewFakeClock(1_700_000_000), NumPartitions: 8, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	b, err := eng.CreateBucket(ctx, DefaultBucketSettings("b"))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.CreateScope(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateCollection(ctx, "s", "c2", 0); err != nil {
		t.Fatal(err)
	}
	c2, err := b.Collection("s", "c2")
	if err != nil {
		t.Fatal(err)
	}
	const n = 100
	for i := range n {
		for _, c := range []*Collection{b.DefaultCollection(), c2} {
			if _, err := c.Upsert(ctx, fmt.Sprint("k", i), []byte(`{}`), nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	keepFilters(ctx, t, b)
	evictAll := func(when string) {
		t.Helper()
		if err := b.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		evictItems(b, func(string) bool { return true })
		if st := b.Stats(); st.NonResident != st.CurrItems {
			t.Fatalf("%s: %d of %d documents out of memory", when, st.NonResident, st.CurrItems)
		}
		if err := b.Check(ctx); err != nil {
			t.Fatalf("%s: %v", when, err)
		}
	}

	evictAll("before the TTL change")
	// The _changes feeds read the documents out of memory from the store.
	if all := changesOf(t, b, nil, 0); int64(len(all)-len(deletedIn(all))) != b.Stats().CurrItems {
		t.Fatalf("Bucket.Changes over documents out of memory reads %d live, curr_items %d", len(all)-len(deletedIn(all)), b.Stats().CurrItems)
	} else {
		sameDocs(t, "ScanChanges over documents out of memory", scanOf(t, b, 0, 1000), all)
	}
	_, changed, err := b.UpdateCollection(ctx, "s", "c2", func(cs *CollectionSettings) error { cs.DefaultTTL = 1000; return nil })
	if err != nil || changed != n {
		t.Fatalf("a DefaultTTL over documents out of memory re-derived %d of %d: %v", changed, n, err)
	}
	if err := b.Check(ctx); err != nil {
		t.Fatalf("after the TTL change: %v", err)
	}
	if got := b.Stats().WithExpiry; got != n {
		t.Fatalf("ep_items_with_expiry %d after the TTL change, want %d", got, n)
	}

	evictAll("before the drop")
	if err := b.DropCollection(ctx, "s", "c2"); err != nil {
		t.Fatal(err)
	}
	if err := b.Check(ctx); err != nil {
		t.Fatalf("after the drop: %v", err)
	}
	if got := b.Stats().CurrItems; got != n {
		t.Fatalf("curr_items %d after the drop, want %d", got, n)
	}

	evictAll("before the flush")
	if flushed, err := b.Flush(ctx); err != nil || flushed != n {
		t.Fatalf("Flush of documents out of memory deleted %d of %d: %v", flushed, n, err)
	}
	if err := b.Check(ctx); err != nil {
		t.Fatalf("after the flush: %v", err)
	}
	if got := b.Stats().CurrItems; got != 0 {
		t.Fatalf("curr_items %d after the flush", got)
	}
}

// GetResident (the memcached port's event loops) answers a key out of
// memory whole with ErrWouldBlock, reading nothing, and a key no document
// has, which the Bloom filter rules out, with not found at once; Get then
// reads the first back.
func TestGetResidentOfEvictedItem(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var reads *countingDocReads
	eng, err := Open(t.TempDir(), &Options{NumPartitions: 8, NoSync: true, wrapStorage: func(st storage) storage {
		reads = &countingDocReads{storage: st}
		return reads
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	b, err := eng.CreateBucket(ctx, DefaultBucketSettings("b"))
	if err != nil {
		t.Fatal(err)
	}
	c := b.DefaultCollection()
	if _, err := c.Upsert(ctx, "k", []byte(`{"a":1}`), nil); err != nil {
		t.Fatal(err)
	}
	keepFilters(ctx, t, b)
	if evictItems(b, func(string) bool { return true }) != 1 {
		t.Fatal("k did not leave memory")
	}
	before := reads.reads.Load()
	if _, err := c.GetResident(ctx, "k"); !errors.Is(err, ErrWouldBlock) {
		t.Fatalf("GetResident of a key out of memory: %v, want ErrWouldBlock", err)
	}
	if _, err := c.GetResident(ctx, "never"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetResident of a key never written: %v, want not found", err)
	}
	if n := reads.reads.Load() - before; n != 0 {
		t.Fatalf("GetResident read the store %d times", n)
	}
	if d, err := c.Get(ctx, "k"); err != nil || string(d.Value) != `{"a":1}` {
		t.Fatalf("Get of a key out of memory: %v %+v", err, d)
	}
}

// A fullEviction bucket counts a read of an item out of memory whole as
// Couchbase counts its background fetches: a read that returns the
// document with its value (Get, Peek, a touch, GetLocked, a listing) in
// ep_bg_fetched, a write or a delete that needs only the metadata in
// ep_bg_meta_fetched; a key the Bloom filter rules out counts in neither.
func TestEvictedItemFetchCounts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // catches a hang only
	defer cancel()
	eng, err := Open(t.TempDir(), &Options{NumPartitions: 4, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	s := DefaultBucketSettings("b")
	s.EvictionPolicy = FullEviction
	b, err := eng.CreateBucket(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	c := b.DefaultCollection()
	const n = 12
	for i := range n {
		if _, err := c.Upsert(ctx, fmt.Sprint("k", i), []byte(fmt.Sprintf(`{"n":%d}`, i)), nil); err != nil {
			t.Fatal(err)
		}
	}
	evictAll := func(want int) {
		t.Helper()
		if err := b.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if got := evictItems(b, func(string) bool { return true }); got != want {
			t.Fatalf("%d items left memory, want %d", got, want)
		}
	}
	counts := func() (values, metas int64) {
		st := b.Stats()
		return st.BgFetched, st.Bloom.MetaFetched
	}
	evictAll(n)

	v0, m0 := counts()
	for _, k := range []string{"k0", "k1"} {
		if d, err := c.Get(ctx, k); err != nil || d.Value == nil {
			t.Fatalf("Get %s out of memory: %v %+v", k, err, d)
		}
	}
	if d, err := c.Peek("k2"); err != nil || d.Value == nil {
		t.Fatalf("Peek k2 out of memory: %v %+v", err, d)
	}
	if d, err := c.GetAndTouch(ctx, "k3", 0); err != nil || string(d.Value) != `{"n":3}` {
		t.Fatalf("GetAndTouch k3 out of memory: %v %+v", err, d)
	}
	if d, err := c.GetLocked(ctx, "k4", 5); err != nil || string(d.Value) != `{"n":4}` {
		t.Fatalf("GetLocked k4 out of memory: %v %+v", err, d)
	}
	if _, err := c.Get(ctx, "never"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get of a key never written: %v", err)
	}
	if v, m := counts(); v-v0 != 5 || m != m0 {
		t.Fatalf("after 5 reads of items out of memory: ep_bg_fetched +%d, ep_bg_meta_fetched +%d; want +5, +0", v-v0, m-m0)
	}

	v0, m0 = counts()
	if _, err := c.Upsert(ctx, "k5", []byte(`{"n":"five"}`), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Replace(ctx, "k6", []byte(`{"n":"six"}`), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Delete(ctx, "k7", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Insert(ctx, "k8", []byte(`{}`), nil); !errors.Is(err, ErrKeyExists) {
		t.Fatalf("Insert of a stored key out of memory: %v, want ErrKeyExists", err)
	}
	if v, m := counts(); v != v0 || m-m0 != 4 {
		t.Fatalf("after 4 writes of items out of memory: ep_bg_fetched +%d, ep_bg_meta_fetched +%d; want +0, +4", v-v0, m-m0)
	}

	// A listing reads the items out of memory with their values: those
	// read back above leave again, k7's tombstone too (no consumer needs
	// it), but k4, locked, stays (k9 to k11 never came back: n-1 out in
	// all, n-2 of them live).
	evictAll(n - 4)
	v0, m0 = counts()
	listed := 0
	for d, err := range c.List(ctx, ListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		if d.Value == nil {
			t.Fatalf("listed %s without its value", d.Key)
		}
		listed++
	}
	if listed != n-1 {
		t.Fatalf("listed %d documents, want %d", listed, n-1)
	}
	// (k7's tombstone is read from the store too, to find it deleted.)
	if v, m := counts(); v-v0 != n-1 || m != m0 {
		t.Fatalf("after listing %d items out of memory: ep_bg_fetched +%d, ep_bg_meta_fetched +%d; want +%d, +0", n-1, v-v0, m-m0, n-1)
	}
}

// crashCopy copies the data directory dir of the open bucket b to to, as a
// kill -9 would leave it once b synced: the files, but a pebble store's by
// its own checkpoint (pebble compacts in the background, so a plain copy of
// its directory could miss a table a compaction deleted meanwhile, or hold
// a manifest naming one it made).
func crashCopy(t *testing.T, b *Bucket, dir, to string) {
	t.Helper()
	st := b.store.st
	if w, wrapped := st.(*countingDocReads); wrapped {
		st = w.storage // (the model test counts the store's reads by key)
	}
	ps, ok := st.(*pebbleStorage)
	var skip string
	if ok {
		rel, err := filepath.Rel(dir, ps.dir)
		if err != nil || strings.HasPrefix(rel, "..") {
			t.Fatalf("the pebble store %s is not under %s", ps.dir, dir)
		}
		skip = filepath.ToSlash(rel)
	}
	err := fs.WalkDir(os.DirFS(dir), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path == skip {
			return fs.SkipDir
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, path), 0o755)
		}
		data, err := os.ReadFile(filepath.Join(dir, path))
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, path), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	if ok {
		if err := ps.db.Checkpoint(filepath.Join(to, skip)); err != nil {
			t.Fatal(err)
		}
	}
}
