package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"
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
	for _, kind := range []string{StoragePebble, StorageBolt} {
		t.Run(kind, func(t *testing.T) { evictedItemsModel(t, kind, false) })
		t.Run(kind+"/quota", func(t *testing.T) { evictedItemsModel(t, kind, true) })
	}
}

// evictedItemsModel is TestEvictedItemsModel on one store: with quota, on
// a fullEviction bucket of 1 MiB whose 3 KB documents leave memory by its
// own eviction; else on a bucket whose items the test takes out.
func evictedItemsModel(t *testing.T, kind string, quota bool) {
	{
		{
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			dir := t.TempDir()
			clk := NewFakeClock(1_700_000_000)
			var reads *countingDocReads // the open store's reads by key
			open := func() (*Engine, *Bucket) {
				// (Synced commits: a copy of the files after Sync holds them.)
				eng, err := Open(dir, &Options{Clock: clk, NumPartitions: 8, Storage: kind, fullEviction: true,
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
			var outMax int64 // the most documents seen out of memory whole
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
			for step := range 3000 {
				key := fmt.Sprint("k", rng.IntN(keys))
				now := clk.Now()
				md, ok := model[key]
				if ok && md.exp != 0 && md.exp <= now {
					// Due: the next access expires it (any op below).
					ok = false
				}
				val := fmt.Sprintf(`{"s":%d,"p":"%s"}`, step, pad)
				outMax = max(outMax, b.mem.out.Load())
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
					}
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
						if err := os.CopyFS(crashed, os.DirFS(dir)); err != nil {
							t.Fatal(err)
						}
						dir = crashed
					}
					if err := eng.Close(); err != nil {
						t.Fatal(err)
					}
					eng, b = open()
					c = b.DefaultCollection()
					check(fmt.Sprintf("step %d: after a restart", step))
				}
			}
			if err := b.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			if quota {
				t.Logf("at most %d of %d documents out of memory whole; mem_used %d of a %d quota at the end", outMax, len(model), b.memUsed(), b.mem.quota.Load())
				if outMax == 0 {
					t.Fatal("no item left memory whole")
				}
			}
			if evictItems(b, func(string) bool { return true }) == 0 {
				t.Fatal("nothing left memory")
			}
			check("at the end, every item out of memory")
			if st := b.Stats(); st.NonResident != st.CurrItems {
				t.Fatalf("every item out of memory: ep_num_non_resident %d, curr_items %d", st.NonResident, st.CurrItems)
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
	// The feeds that do not backfill yet say so rather than skip documents.
	if _, _, err := b.Changes(nil, 0); !errors.Is(err, ErrInvalidOp) {
		t.Fatalf("Bucket.Changes over documents out of memory: %v, want ErrInvalidOp", err)
	}
	for part := range b.NumPartitions() {
		s := ChangeScan{Part: part, Hi: ^uint64(0), Limit: 1000}
		b.ScanChanges(&s)
		if b.parts[part].mu.evictedMax > 0 && (!errors.Is(s.Err, ErrInvalidOp) || len(s.Docs) != 0) {
			t.Fatalf("ScanChanges of partition %d over documents out of memory: %d documents, %v; want ErrInvalidOp", part, len(s.Docs), s.Err)
		}
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
