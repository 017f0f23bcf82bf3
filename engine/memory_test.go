package engine_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// memBucket creates a bucket of the given type, quota and evictionPolicy.
func memBucket(t *testing.T, typ engine.BucketType, quotaMB int64, policy engine.EvictionPolicy) *engine.Bucket {
	t.Helper()
	eng, _ := newEngine(t, t.TempDir())
	b, err := eng.CreateBucket(context.Background(), engine.BucketSettings{Name: "m", Type: typ, RAMQuotaMB: quotaMB, EvictionPolicy: policy})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func memKey(i int) string { return fmt.Sprintf("k%05d", i) }

// memValue is a 200-byte value that names its key.
func memValue(i int) []byte {
	return append([]byte(fmt.Sprintf(`{"k":%d,"pad":"`, i)), append(bytes.Repeat([]byte("x"), 180-len(fmt.Sprint(i))), `"}`...)...)
}

func TestMemcachedBucketEvictsLeastRecentlyUsed(t *testing.T) {
	ctx := context.Background()
	b := memBucket(t, engine.Memcached, 1, "")
	c := b.DefaultCollection()
	put := func(i int) {
		t.Helper()
		if _, err := c.Upsert(ctx, memKey(i), memValue(i), nil); err != nil {
			t.Fatalf("upsert %s: %v", memKey(i), err)
		}
		if st := b.Stats(); st.MemUsed > st.MemHighWat {
			t.Fatalf("after writing %s: mem_used %d above the high-water mark %d", memKey(i), st.MemUsed, st.MemHighWat)
		}
	}
	const first, read, total = 500, 100, 4000
	for i := range first {
		put(i)
	}
	if st := b.Stats(); st.Evictions != 0 {
		t.Fatalf("%d evictions after %d small writes into 1 MiB", st.Evictions, first)
	}
	for i := range read { // recently used: these must outlive the others
		if _, err := c.Get(ctx, memKey(i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := first; i < total; i++ {
		put(i)
	}
	st := b.Stats()
	t.Logf("%d written: curr_items %d, evictions %d, mem_used %d, ep_kv_size %d", total, st.CurrItems, st.Evictions, st.MemUsed, st.KVSize)
	if st.Evictions == 0 {
		t.Fatalf("no eviction after %d writes of ~200 bytes into 1 MiB (mem_used %d)", total, st.MemUsed)
	}
	if st.CurrItems+st.Evictions != total {
		t.Errorf("curr_items %d + evictions %d != %d written", st.CurrItems, st.Evictions, total)
	}
	if st.MemUsed < st.KVSize || st.KVSize < st.CurrItems*200 {
		t.Errorf("mem_used %d, ep_kv_size %d for %d items of 200 bytes", st.MemUsed, st.KVSize, st.CurrItems)
	}
	if st.MemHighWat != 1<<20*85/100 || st.MemLowWat != 1<<20*75/100 {
		t.Errorf("water marks %d/%d, want 85%%/75%% of 1 MiB", st.MemHighWat, st.MemLowWat)
	}
	// Least recently used first: the items read survive, and the evicted
	// ones are exactly the oldest of those never read.
	for i := range total {
		d, err := c.Get(ctx, memKey(i))
		evicted := i >= read && i < read+int(st.Evictions)
		switch {
		case evicted && err == nil:
			t.Errorf("%s survived; the %d evicted should be the oldest unread (%s..%s)", memKey(i), st.Evictions, memKey(read), memKey(read+int(st.Evictions)-1))
		case evicted && !errors.Is(err, engine.ErrNotFound):
			t.Errorf("get evicted %s: %v, want ErrNotFound", memKey(i), err)
		case !evicted && err != nil:
			t.Errorf("get %s: %v (evicted %d, read %d)", memKey(i), err, st.Evictions, read)
		case !evicted && !bytes.Equal(d.Value, memValue(i)):
			t.Errorf("%s holds %q", memKey(i), d.Value)
		}
	}
}

func TestMemcachedBucketEvictsWhenQuotaLowered(t *testing.T) {
	ctx := context.Background()
	b := memBucket(t, engine.Memcached, 2, "")
	c := b.DefaultCollection()
	n := 0
	for b.Stats().MemUsed < 1<<20 {
		if _, err := c.Upsert(ctx, memKey(n), memValue(n), nil); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if st := b.Stats(); st.Evictions != 0 {
		t.Fatalf("%d evictions under a 2 MiB quota at mem_used %d", st.Evictions, st.MemUsed)
	}
	if _, _, err := b.UpdateSettings(ctx, func(s *engine.BucketSettings) error { s.RAMQuotaMB = 1; return nil }); err != nil {
		t.Fatal(err)
	}
	st := b.Stats()
	if st.Evictions == 0 || st.MemUsed > st.MemLowWat {
		t.Errorf("quota lowered to 1 MiB: evictions %d, mem_used %d, low-water mark %d", st.Evictions, st.MemUsed, st.MemLowWat)
	}
	if st.CurrItems+st.Evictions != int64(n) {
		t.Errorf("curr_items %d + evictions %d != %d written", st.CurrItems, st.Evictions, n)
	}
}

func TestEphemeralNoEvictionRefusesPastQuota(t *testing.T) {
	ctx := context.Background()
	b := memBucket(t, engine.Ephemeral, 1, "")
	if got := b.Settings().EvictionPolicy; got != engine.NoEviction {
		t.Fatalf("ephemeral bucket's default evictionPolicy %q, want noEviction", got)
	}
	c := b.DefaultCollection()
	n := 0
	var refused error
	for ; n < 10000; n++ {
		if _, err := c.Upsert(ctx, memKey(n), memValue(n), nil); err != nil {
			refused = err
			break
		}
	}
	if !errors.Is(refused, engine.ErrTempOOM) {
		t.Fatalf("write %d past a 1 MiB quota: %v, want ErrTempOOM", n, refused)
	}
	st := b.Stats()
	if st.MemUsed > 1<<20 || st.TmpOOMErrors != 1 || st.Evictions != 0 || st.CurrItems != int64(n) {
		t.Errorf("at the quota: mem_used %d, tmp_oom %d, evictions %d, curr_items %d (stored %d)", st.MemUsed, st.TmpOOMErrors, st.Evictions, st.CurrItems, n)
	}
	// Nothing stored is lost; a rewrite that does not grow, reads and
	// deletes still work.
	for i := range n {
		d, err := c.Get(ctx, memKey(i))
		if err != nil || !bytes.Equal(d.Value, memValue(i)) {
			t.Fatalf("get %s at the quota: %v", memKey(i), err)
		}
	}
	if _, err := c.Upsert(ctx, memKey(0), memValue(0), nil); err != nil {
		t.Errorf("rewrite of the same size at the quota: %v", err)
	}
	if _, err := c.Insert(ctx, "another", memValue(n), nil); !errors.Is(err, engine.ErrTempOOM) {
		t.Errorf("insert at the quota: %v, want ErrTempOOM", err)
	}
	for i := range 10 {
		if _, err := c.Delete(ctx, memKey(i), nil); err != nil {
			t.Fatalf("delete at the quota: %v", err)
		}
	}
	if _, err := c.Insert(ctx, "another", memValue(n), nil); err != nil {
		t.Errorf("insert after deletes made room: %v", err)
	}
	if got := b.Stats().CurrItems; got != int64(n-10+1) {
		t.Errorf("curr_items %d, want %d", got, n-10+1)
	}
}

func TestEphemeralNRUEvictionDeletes(t *testing.T) {
	ctx := context.Background()
	b := memBucket(t, engine.Ephemeral, 1, engine.NRUEviction)
	c := b.DefaultCollection()
	const total = 4500
	for i := range total {
		if _, err := c.Upsert(ctx, memKey(i), memValue(i), nil); err != nil {
			t.Fatalf("upsert %d: %v", i, err)
		}
	}
	st := b.Stats()
	// The live documents stay under the high-water mark; the tombstones
	// eviction leaves count in mem_used until the metadata purge.
	if st.Evictions == 0 || st.CurrItems*(200+64) > st.MemHighWat /* value and record at least */ || st.CurrItems < total/3 {
		t.Fatalf("nruEviction: evictions %d, curr_items %d, mem_used %d, high-water mark %d", st.Evictions, st.CurrItems, st.MemUsed, st.MemHighWat)
	}
	// Each eviction is a deletion: a tombstone the change feed carries.
	if st.CurrItems+st.Evictions != total || st.Tombstones != st.Evictions {
		t.Errorf("curr_items %d, tombstones %d, evictions %d, %d written", st.CurrItems, st.Tombstones, st.Evictions, total)
	}
	if _, err := c.Get(ctx, memKey(0)); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("oldest document after eviction: %v, want ErrNotFound", err)
	}
	if _, err := c.Get(ctx, memKey(total-1)); err != nil {
		t.Errorf("newest document: %v", err)
	}
}

func TestEvictionPolicyValidation(t *testing.T) {
	ctx := context.Background()
	eng, _ := newEngine(t, t.TempDir())
	for _, tc := range []struct {
		typ    engine.BucketType
		policy engine.EvictionPolicy
		want   engine.EvictionPolicy // "" when refused
	}{
		{engine.Couchbase, "", engine.ValueOnly},
		{engine.Couchbase, engine.FullEviction, engine.FullEviction},
		{engine.Couchbase, engine.NoEviction, ""},
		{engine.Ephemeral, "", engine.NoEviction},
		{engine.Ephemeral, engine.NRUEviction, engine.NRUEviction},
		{engine.Ephemeral, engine.ValueOnly, ""},
		{engine.Memcached, engine.NRUEviction, ""},
		{engine.Couchbase, "lru", ""},
	} {
		name := fmt.Sprintf("b-%s-%s", tc.typ, tc.policy)
		b, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: name, Type: tc.typ, EvictionPolicy: tc.policy})
		if tc.want == "" {
			if !errors.Is(err, engine.ErrInvalidSetting) {
				t.Errorf("%s bucket with evictionPolicy %q: %v, want ErrInvalidSetting", tc.typ, tc.policy, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s bucket with evictionPolicy %q: %v", tc.typ, tc.policy, err)
			continue
		}
		if got := b.Settings().EvictionPolicy; got != tc.want {
			t.Errorf("%s bucket with evictionPolicy %q has %q, want %q", tc.typ, tc.policy, got, tc.want)
		}
	}
	// An ephemeral bucket takes no couchbase policy, by creation or by a
	// change, and a refused change changes nothing. (A couchbase bucket's
	// change restarts it: reopen_test.go.)
	eb, err := eng.Bucket("b-ephemeral-")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := eb.UpdateSettings(ctx, func(s *engine.BucketSettings) error { s.EvictionPolicy = engine.FullEviction; return nil }); !errors.Is(err, engine.ErrInvalidSetting) {
		t.Errorf("ephemeral bucket changed to fullEviction: %v, want ErrInvalidSetting", err)
	}
	if got := eb.Settings().EvictionPolicy; got != engine.NoEviction {
		t.Errorf("ephemeral bucket's evictionPolicy %s after a refused change, want noEviction", got)
	}
	m, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "mc", Type: engine.Memcached})
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Settings().EvictionPolicy; got != "" {
		t.Errorf("memcached bucket's evictionPolicy %q, want none", got)
	}
	if _, _, err := m.UpdateSettings(ctx, func(s *engine.BucketSettings) error { s.EvictionPolicy = engine.ValueOnly; return nil }); !errors.Is(err, engine.ErrInvalidSetting) {
		t.Errorf("memcached bucket given evictionPolicy valueOnly: %v, want ErrInvalidSetting", err)
	}
	// No scopes either, as no collections: Couchbase's memcached buckets
	// have neither.
	if err := m.CreateScope(ctx, "s"); !errors.Is(err, engine.ErrInvalidSetting) {
		t.Errorf("a scope in a memcached bucket: %v, want ErrInvalidSetting", err)
	}
	if _, err := m.CreateCollection(ctx, "_default", "c", 0); !errors.Is(err, engine.ErrInvalidSetting) {
		t.Errorf("a collection in a memcached bucket: %v, want ErrInvalidSetting", err)
	}
}

func TestCouchbaseBucketAccountsBelowQuota(t *testing.T) {
	ctx := context.Background()
	b := memBucket(t, engine.Couchbase, 1, "")
	c := b.DefaultCollection()
	const n = 200
	for i := range n {
		if _, err := c.Upsert(ctx, memKey(i), memValue(i), nil); err != nil {
			t.Fatal(err)
		}
	}
	st := b.Stats()
	if st.KVSize < n*200 || st.MemUsed < st.KVSize || st.Evictions != 0 || st.NumValueEjects != 0 {
		t.Errorf("%d documents of 200 bytes: ep_kv_size %d, mem_used %d, evictions %d, ejects %d", n, st.KVSize, st.MemUsed, st.Evictions, st.NumValueEjects)
	}
	freed := int64(0) // the values deleted
	for i := range n / 2 {
		if _, err := c.Delete(ctx, memKey(i), nil); err != nil {
			t.Fatal(err)
		}
		freed += int64(len(memValue(i)))
	}
	if got := b.Stats().KVSize; got > st.KVSize-freed {
		t.Errorf("ep_kv_size %d after deleting half of %d documents (was %d)", got, n, st.KVSize)
	}
}

// TestEvictionUnderConcurrentWriters: writers and readers of a memcached
// bucket at its quota from several goroutines: every item written is either
// there or counted as evicted, and the counters hold (engine.Check, in the
// cleanup, recounts ep_kv_size).
func TestEvictionUnderConcurrentWriters(t *testing.T) {
	ctx := context.Background()
	b := memBucket(t, engine.Memcached, 1, "")
	c := b.DefaultCollection()
	const writers, each = 4, 1500
	errs := make(chan error, writers)
	for w := range writers {
		go func() {
			for i := range each {
				n := w*each + i
				if _, err := c.Upsert(ctx, memKey(n), memValue(n), nil); err != nil {
					errs <- err
					return
				}
				if _, err := c.Get(ctx, memKey(w*each+i/2)); err != nil && !errors.Is(err, engine.ErrNotFound) {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range writers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	st := b.Stats()
	if st.Evictions == 0 || st.CurrItems+st.Evictions != writers*each {
		t.Errorf("curr_items %d + evictions %d, want %d written", st.CurrItems, st.Evictions, writers*each)
	}
	present := 0
	for n := range writers * each {
		if _, err := c.Get(ctx, memKey(n)); err == nil {
			present++
		}
	}
	if int64(present) != st.CurrItems {
		t.Errorf("%d items readable, curr_items %d", present, st.CurrItems)
	}
}

// TestEphemeralNRUEvictionSmallDocuments: deleting a small document frees
// little (its tombstone stays until the metadata purge), so eviction must not
// delete every document chasing the low-water mark.
func TestEphemeralNRUEvictionSmallDocuments(t *testing.T) {
	ctx := context.Background()
	b := memBucket(t, engine.Ephemeral, 1, engine.NRUEviction)
	c := b.DefaultCollection()
	const total = 12000
	for i := range total {
		if _, err := c.Upsert(ctx, memKey(i), []byte("1"), nil); err != nil {
			t.Fatalf("upsert %d: %v", i, err)
		}
	}
	st := b.Stats()
	if st.Evictions == 0 || st.CurrItems < total/4 || st.CurrItems+st.Evictions != total {
		t.Errorf("%d small documents into 1 MiB with nruEviction: curr_items %d, evictions %d, mem_used %d", total, st.CurrItems, st.Evictions, st.MemUsed)
	}
}

// TestEphemeralPolicySwitchQueuesKeys: an ephemeral bucket with noEviction
// keeps no eviction queue; switched to nruEviction it queues the keys it
// holds, so the next writes past the high-water mark evict the oldest of
// them; switched back, it refuses again and evicts nothing more.
func TestEphemeralPolicySwitchQueuesKeys(t *testing.T) {
	ctx := context.Background()
	b := memBucket(t, engine.Ephemeral, 1, engine.NoEviction)
	c := b.DefaultCollection()
	n := 0
	for b.Stats().MemUsed < b.Stats().MemHighWat-4096 {
		if _, err := c.Upsert(ctx, memKey(n), memValue(n), nil); err != nil {
			t.Fatalf("upsert %d under noEviction: %v", n, err)
		}
		n++
	}
	setPolicy := func(p engine.EvictionPolicy) {
		t.Helper()
		if _, _, err := b.UpdateSettings(ctx, func(s *engine.BucketSettings) error { s.EvictionPolicy = p; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	setPolicy(engine.NRUEviction)
	for i := n; i < n+400; i++ {
		if _, err := c.Upsert(ctx, memKey(i), memValue(i), nil); err != nil {
			t.Fatalf("upsert %d under nruEviction: %v", i, err)
		}
	}
	st := b.Stats()
	// (Evictions are deletions: their tombstones stay in mem_used until
	// the metadata purge, as TestEphemeralNRUEvictionDeletes says.)
	if st.Evictions == 0 || st.CurrItems*200 > st.MemHighWat {
		t.Fatalf("after switching to nruEviction: evictions %d, curr_items %d, high-water mark %d", st.Evictions, st.CurrItems, st.MemHighWat)
	}
	if _, err := c.Get(ctx, memKey(0)); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("the oldest document, written before the switch: %v, want ErrNotFound (evicted)", err)
	}
	setPolicy(engine.NoEviction)
	evicted := st.Evictions
	refused := false
	for i := n + 400; i < n+2000 && !refused; i++ {
		_, err := c.Upsert(ctx, memKey(i), memValue(i), nil)
		refused = errors.Is(err, engine.ErrTempOOM)
		if err != nil && !refused {
			t.Fatal(err)
		}
	}
	if st := b.Stats(); !refused || st.Evictions != evicted {
		t.Errorf("back to noEviction: refused %v, evictions %d (were %d)", refused, st.Evictions, evicted)
	}
	if err := b.Check(ctx); err != nil {
		t.Error(err)
	}
}

// TestEvictingBucketRefusesItemItCannotKeep: a memcached bucket, or an
// ephemeral one with nruEviction, refuses (ErrValueTooLarge) a write of an
// item that alone needs more memory than the low-water mark, which eviction
// runs down to. Taken, it was acknowledged and then evicted at once, with
// every other item of the bucket. The items stored stay, and an item that
// fits is still taken.
func TestEvictingBucketRefusesItemItCannotKeep(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		typ    engine.BucketType
		policy engine.EvictionPolicy
	}{{engine.Memcached, ""}, {engine.Ephemeral, engine.NRUEviction}} {
		t.Run(string(c.typ), func(t *testing.T) {
			b := memBucket(t, c.typ, 1, c.policy)
			coll := b.DefaultCollection()
			const n = 100
			for i := range n {
				if _, err := coll.Upsert(ctx, memKey(i), memValue(i), nil); err != nil {
					t.Fatal(err)
				}
			}
			big := bytes.Repeat([]byte("b"), 1<<20*3/4) // past the low-water mark with its key and metadata
			if _, err := coll.Upsert(ctx, "big", big, nil); !errors.Is(err, engine.ErrValueTooLarge) {
				t.Errorf("upsert of %d bytes into a 1 MiB bucket: %v, want ErrValueTooLarge", len(big), err)
			}
			if _, err := coll.Get(ctx, "big"); !errors.Is(err, engine.ErrNotFound) {
				t.Errorf("get big after the refusal: %v, want ErrNotFound", err)
			}
			st := b.Stats()
			if st.CurrItems != n || st.Evictions != 0 {
				t.Errorf("after the refused write: curr_items %d, evictions %d; want %d and 0 (nothing stored lost)", st.CurrItems, st.Evictions, n)
			}
			for i := range n {
				if d, err := coll.Get(ctx, memKey(i)); err != nil || !bytes.Equal(d.Value, memValue(i)) {
					t.Fatalf("get %s after the refused write: %v", memKey(i), err)
				}
			}
			fits := bytes.Repeat([]byte("f"), 1<<20/2)
			if _, err := coll.Upsert(ctx, "fits", fits, nil); err != nil {
				t.Fatalf("upsert of %d bytes into a 1 MiB bucket: %v", len(fits), err)
			}
			if d, err := coll.Get(ctx, "fits"); err != nil || !bytes.Equal(d.Value, fits) {
				t.Errorf("get fits: %v", err)
			}
		})
	}
}
