package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A filter answers for every key added, whatever its size when it was
// made, and rules out all but about bloomFPProb of the keys never added,
// also after it grew past its first capacity many times.
func TestBloomFilterAnswers(t *testing.T) {
	for _, sized := range []int64{bloomMinKeys, 20000} {
		t.Run(fmt.Sprint("sized for ", sized), func(t *testing.T) {
			f := newBloomFilter(sized)
			const n = 20000
			for i := range n {
				f.add(docKey{cid: CollectionID(i % 3), key: fmt.Sprint("key-", i)})
			}
			for i := range n {
				if k := (docKey{cid: CollectionID(i % 3), key: fmt.Sprint("key-", i)}); !f.mayHave(k) {
					t.Fatalf("key %v added, then ruled out", k)
				}
			}
			if f.keys < n*98/100 || f.keys > n {
				t.Errorf("key count %d after %d distinct keys", f.keys, n)
			}
			// The same key in another collection is another key.
			var fp int
			const probes = 100000
			for i := range probes {
				if f.mayHave(docKey{cid: CollectionID(i%3 + 3), key: fmt.Sprint("key-", i)}) {
					fp++
				}
			}
			if rate := float64(fp) / probes; rate > 2*bloomFPProb {
				t.Errorf("false-positive rate %.4f, want about %.2f (at most twice)", rate, bloomFPProb)
			}
			again := f.keys
			f.add(docKey{cid: 1, key: "key-1"})
			if f.keys != again {
				t.Errorf("adding a key again counted it: %d keys, was %d", f.keys, again)
			}
		})
	}
}

// countingDocReads is a store that counts its reads by key.
type countingDocReads struct {
	storage
	reads atomic.Int64
}

func (c *countingDocReads) doc(k docKey) (*Document, error) {
	c.reads.Add(1)
	return c.storage.doc(k)
}

// A couchbase bucket's warm-up reads its store's keys into the partitions'
// Bloom filters before it loads the documents: a read or an insert of a
// key not loaded yet that the store does not hold then answers without
// reading the store (a read of a stored key still reads it, and counts in
// ep_bg_fetched, a write's in ep_bg_meta_fetched); once the warm-up is done, a valueOnly bucket, whose
// memory holds every key, frees its filters. Each store.
func TestWarmupMissesSkipTheStore(t *testing.T) {
	for _, kind := range []string{StoragePebble, StorageBolt} {
		t.Run(kind, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			dir := t.TempDir()
			eng, err := Open(dir, &Options{NumPartitions: 16, NoSync: true, Storage: kind})
			if err != nil {
				t.Fatal(err)
			}
			b, err := eng.CreateBucket(ctx, DefaultBucketSettings("b"))
			if err != nil {
				t.Fatal(err)
			}
			const n = 500
			for i := range n {
				if _, err := b.DefaultCollection().Upsert(ctx, fmt.Sprint("k", i), []byte(fmt.Sprintf(`{"n":%d}`, i)), nil); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := b.DefaultCollection().Delete(ctx, "k7", nil); err != nil {
				t.Fatal(err)
			}
			if st := b.Stats().Bloom; st.Enabled || st.Keys != 0 {
				t.Fatalf("a warm valueOnly bucket keeps Bloom filters: %+v", st)
			}
			if err := eng.Close(); err != nil {
				t.Fatal(err)
			}

			gate, held := make(chan struct{}), make(chan struct{})
			var hold, release sync.Once
			var cs *countingDocReads
			eng, err = Open(dir, &Options{NumPartitions: 16, NoSync: true, Storage: kind, BackgroundWarmup: true,
				WarmupHook: func(string, int64) { hold.Do(func() { close(held); <-gate }) },
				wrapStorage: func(st storage) storage {
					cs = &countingDocReads{storage: st}
					return cs
				}})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				release.Do(func() { close(gate) })
				if err := eng.Close(); err != nil {
					t.Error(err)
				}
			}()
			b, err = eng.Bucket("b")
			if err != nil {
				t.Fatal(err)
			}
			c := b.DefaultCollection()
			<-held
			st := b.Stats()
			if !st.Bloom.Enabled || st.Bloom.Keys < n*98/100 || st.Bloom.Keys > n || st.Bloom.Size == 0 || st.Warmup.State != WarmupLoading {
				t.Fatalf("held after the keys pass: %+v, warm-up %+v; want filters holding about %d keys", st.Bloom, st.Warmup, n)
			}

			before := cs.reads.Load()
			const absent = 300
			for i := range absent {
				if _, err := c.Get(ctx, fmt.Sprint("absent", i)); !errors.Is(err, ErrNotFound) {
					t.Fatalf("Get of an absent key during warm-up: %v", err)
				}
			}
			// An insert of a new key reads nothing either.
			if _, err := c.Insert(ctx, "new", []byte(`{}`), nil); err != nil {
				t.Fatal(err)
			}
			// At 1% false positives, 301 misses read the store about 3
			// times; 30 would be a filter that does not work.
			reads := cs.reads.Load() - before
			if reads > 30 {
				t.Fatalf("%d misses during warm-up read the store %d times", absent+1, reads)
			}
			if got := b.Stats().Bloom.Negatives; got < absent+1-reads {
				t.Fatalf("ep_bfilter_negatives %d after %d misses with %d store reads", got, absent+1, reads)
			}

			// A stored key not loaded yet is read from the store, as
			// before; a deleted one answers not found.
			before, fetched := cs.reads.Load(), b.Stats().BgFetched
			d, err := c.Get(ctx, "k321")
			if err != nil || string(d.Value) != `{"n":321}` {
				t.Fatalf("Get k321 during warm-up: %v %+v", err, d)
			}
			if _, err := c.Get(ctx, "k7"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Get of a deleted key during warm-up: %v", err)
			}
			if cs.reads.Load() == before || b.Stats().BgFetched == fetched {
				t.Fatalf("a stored key's read during warm-up: %d store reads, ep_bg_fetched %d → %d", cs.reads.Load()-before, fetched, b.Stats().BgFetched)
			}

			release.Do(func() { close(gate) })
			if err := b.WaitWarm(ctx); err != nil {
				t.Fatal(err)
			}
			if st := b.Stats(); st.Bloom.Enabled || st.Bloom.Size != 0 || st.CurrItems != n {
				t.Fatalf("warm: filters %+v, curr_items %d (want none kept, %d)", st.Bloom, st.CurrItems, n)
			}
			if err := b.Check(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
