package engine_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// TestFullEvictionReadsHoldTheQuota: a fullEviction bucket whose items left
// memory whole brings each one back as it is read; a pass of reads alone,
// with no write to start an eviction, must not take mem_used past the
// quota (40,000 small documents in 1 MiB: reads of every key took mem_used
// from 0.87 MB to 3.98 MB, nearly four times the quota, and kept it there).
func TestFullEvictionReadsHoldTheQuota(t *testing.T) {
	ctx := context.Background()
	b := memBucket(t, engine.Couchbase, 1, engine.FullEviction)
	c := b.DefaultCollection()
	const n = 40000
	for i := range n {
		if _, err := c.Upsert(ctx, memKey(i), fmt.Appendf(nil, `{"i":%d}`, i), nil); err != nil {
			t.Fatal(err)
		}
	}
	if st := b.Stats(); st.MemUsed > 1<<20 || st.CurrItems != n {
		t.Fatalf("after %d writes into 1 MiB: mem_used %d, curr_items %d", n, st.MemUsed, st.CurrItems)
	}
	for i := range n {
		d, err := c.Get(ctx, memKey(i))
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf(`{"i":%d}`, i); string(d.Value) != want {
			t.Fatalf("Get %s = %s, want %s", memKey(i), d.Value, want)
		}
		if st := b.Stats(); st.MemUsed > 1<<20 {
			t.Fatalf("after reading %d of %d documents back (no write): mem_used %d past the 1 MiB quota (high-water mark %d)", i+1, n, st.MemUsed, st.MemHighWat)
		}
	}
	for i := range n {
		if _, err := c.Peek(memKey(i)); err != nil {
			t.Fatal(err)
		}
	}
	if st := b.Stats(); st.MemUsed > 1<<20 || st.CurrItems != n {
		t.Fatalf("after Peek of every document: mem_used %d, curr_items %d", st.MemUsed, st.CurrItems)
	}
	for i := range n {
		d, err := c.GetLocked(ctx, memKey(i), 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Unlock(memKey(i), d.CAS); err != nil {
			t.Fatal(err)
		}
	}
	if st := b.Stats(); st.MemUsed > 1<<20 || st.CurrItems != n {
		t.Fatalf("after GetLocked of every document: mem_used %d, curr_items %d", st.MemUsed, st.CurrItems)
	}
}

// TestFullEvictionRefusedWritesHoldTheQuota: a write that is refused (an
// insert of a key that exists, a replace with a wrong CAS) reads its item
// back into memory to decide, and evicts as a write that succeeds does
// (40,000 refused inserts of small documents in 1 MiB took mem_used to
// 3.98 MB on the old code).
func TestFullEvictionRefusedWritesHoldTheQuota(t *testing.T) {
	ctx := context.Background()
	b := memBucket(t, engine.Couchbase, 1, engine.FullEviction)
	c := b.DefaultCollection()
	const n = 40000
	cas := make([]uint64, n)
	for i := range n {
		d, err := c.Upsert(ctx, memKey(i), fmt.Appendf(nil, `{"i":%d}`, i), nil)
		if err != nil {
			t.Fatal(err)
		}
		cas[i] = d.CAS
	}
	for i := range n {
		var err error
		if i%2 == 0 {
			_, err = c.Insert(ctx, memKey(i), []byte(`{}`), nil)
		} else {
			_, err = c.Replace(ctx, memKey(i), []byte(`{}`), &engine.WriteOptions{CAS: cas[i] + 1})
		}
		if !errors.Is(err, engine.ErrKeyExists) && !errors.Is(err, engine.ErrCASMismatch) {
			t.Fatalf("refused write %d: %v", i, err)
		}
		if st := b.Stats(); st.MemUsed > 1<<20 {
			t.Fatalf("after %d refused writes: mem_used %d past the 1 MiB quota (high-water mark %d)", i+1, st.MemUsed, st.MemHighWat)
		}
	}
	if st := b.Stats(); st.CurrItems != n {
		t.Fatalf("curr_items %d, want %d", st.CurrItems, n)
	}
}

// TestFullEvictionUnlockHoldsTheQuota: an unlock of a document that left
// memory reads its item back to find its lock, and evicts as a read does:
// unlocks alone (each refused: no lock holds) must not take mem_used past
// the quota.
func TestFullEvictionUnlockHoldsTheQuota(t *testing.T) {
	ctx := context.Background()
	b := memBucket(t, engine.Couchbase, 1, engine.FullEviction)
	c := b.DefaultCollection()
	const n = 40000
	for i := range n {
		if _, err := c.Upsert(ctx, memKey(i), fmt.Appendf(nil, `{"i":%d}`, i), nil); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		if err := c.Unlock(memKey(i), 1); !errors.Is(err, engine.ErrNotLocked) {
			t.Fatalf("Unlock %s with no lock: %v, want ErrNotLocked", memKey(i), err)
		}
		if st := b.Stats(); st.MemUsed > 1<<20 {
			t.Fatalf("after %d unlocks of documents not in memory: mem_used %d past the 1 MiB quota (high-water mark %d)", i+1, st.MemUsed, st.MemHighWat)
		}
	}
	if st := b.Stats(); st.CurrItems != n {
		t.Fatalf("curr_items %d, want %d", st.CurrItems, n)
	}
}
