package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestCheckCatchesTampering breaks one piece of a bucket's derived state at
// a time and expects Check to name it: a Check that cannot fail would let
// every test that relies on it pass over a broken engine.
func TestCheckCatchesTampering(t *testing.T) {
	cases := []struct {
		name   string
		tamper func(b *Bucket)
		want   string
	}{
		{"curr_items", func(b *Bucket) { b.currItems.Add(1) }, "curr_items"},
		{"expiry entry size", func(b *Bucket) {
			b.exps.mu.Lock()
			defer b.exps.mu.Unlock()
			it, _ := b.exps.tree.Min()
			it.size++
			b.exps.tree.ReplaceOrInsert(it)
		}, "size"},
		{"expiry per-second totals", func(b *Bucket) {
			b.exps.mu.Lock()
			defer b.exps.mu.Unlock()
			it, _ := b.exps.tree.Max()
			t := b.exps.bySec[it.exp]
			t.bytes += 7
			b.exps.bySec[it.exp] = t
		}, "per-second totals"},
		{"missing expiry entry", func(b *Bucket) {
			b.exps.mu.Lock()
			defer b.exps.mu.Unlock()
			b.exps.tree.DeleteMin()
		}, "expiry index"},
		{"expiration not on disk", func(b *Bucket) {
			// The pager expires k0; its file then holds the live record
			// again, as when expirations were written lazily.
			ctx := context.Background()
			k := docKey{key: "k0"}
			p := b.partitionFor(k.key)
			p.mu.RLock()
			live := p.mu.docs.get(k)
			p.mu.RUnlock()
			b.clock.(*FakeClock).Advance(200)
			if _, _, err := b.ExpireBatch(ctx, 100); err != nil {
				panic(err)
			}
			if err := b.Sync(ctx); err != nil {
				panic(err)
			}
			if err := b.store.st.commit([]record{put(live, 0)}); err != nil {
				panic(err)
			}
		}, `"k0" differs from memory`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			eng, err := Open(t.TempDir(), &Options{Clock: NewFakeClock(1_700_000_000), NumPartitions: 8, NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			defer eng.Close()
			b, err := eng.CreateBucket(ctx, BucketSettings{Name: "b"})
			if err != nil {
				t.Fatal(err)
			}
			c := b.DefaultCollection()
			for i := range 20 {
				if _, err := c.Upsert(ctx, fmt.Sprint("k", i), []byte(`{"n":1}`), &WriteOptions{Expiry: int64(100 + i%5)}); err != nil {
					t.Fatal(err)
				}
			}
			if err := eng.Check(ctx); err != nil {
				t.Fatalf("Check before tampering: %v", err)
			}
			tc.tamper(b)
			err = eng.Check(ctx)
			if !errors.Is(err, ErrCheck) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Check after tampering with %s = %v, want an ErrCheck naming %q", tc.name, err, tc.want)
			}
		})
	}
}
