package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// TestCountsFollowAcknowledgedWrites is a model test of curr_items and the
// collections' counts on a bucket whose writes are acknowledged from memory
// (durability none): after every step they equal the number of keys a
// reader finds live (expired but not purged ones included, as Couchbase
// counts them), whatever is still on its way to disk. The steps mix writes
// and deletes acknowledged from memory, writes that wait for disk,
// expirations found by reads and by the pager, and commits that fail and
// take the acknowledged writes since the last commit with them (the counts
// go back to the committed versions). The flush interval is an hour, so a
// commit happens only where a step makes one, and the model knows what each
// failed commit loses.
func TestCountsFollowAcknowledgedWrites(t *testing.T) {
	for seed := range uint64(6) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { countsModel(t, seed, 400) })
	}
}

// countsModelKey is what the model knows of a key.
type countsModelKey struct {
	live bool
	exp  int64 // its expiration (0: none), while live
}

func countsModel(t *testing.T, seed uint64, steps int) {
	ctx, cancel := context.WithCancel(t.Context()) // no deadline: go test -timeout catches a hang
	defer cancel()
	clk := NewFakeClock(1_700_000_000)
	var fs *faultyStorage
	eng, err := Open(t.TempDir(), &Options{Clock: clk, NumPartitions: 4, NoSync: true, FlushInterval: time.Hour,
		wrapStorage: func(st storage) storage {
			fs = &faultyStorage{storage: st}
			return fs
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	b, err := eng.CreateBucket(ctx, BucketSettings{Name: "b", Type: Couchbase, DurabilityMinLevel: DurabilityNone})
	if err != nil {
		t.Fatal(err)
	}
	b.store.probeGap = time.Millisecond
	if _, err := b.CreateCollection(ctx, "_default", "other", 0); err != nil {
		t.Fatal(err)
	}
	other, err := b.Collection("_default", "other")
	if err != nil {
		t.Fatal(err)
	}
	colls := []*Collection{b.DefaultCollection(), other}
	type mkey struct {
		c   int
		key string
	}
	model := map[mkey]countsModelKey{}     // what readers see
	committed := map[mkey]countsModelKey{} // as of the last commit
	// dirty holds the keys written since the last commit: a version on
	// its way to disk decides, so neither a read nor the pager expires
	// it before its commit (it counts as expired but not purged).
	dirty := map[mkey]bool{}
	commit := func(what string) {
		t.Helper()
		if err := b.Sync(ctx); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		clear(dirty)
		committed = make(map[mkey]countsModelKey, len(model))
		for k, v := range model {
			committed[k] = v
		}
	}
	rng := rand.New(rand.NewPCG(seed, 7))
	for step := range steps {
		ci := rng.IntN(len(colls))
		c := colls[ci]
		mk := mkey{ci, fmt.Sprintf("k%d", rng.IntN(10))}
		cur := model[mk]
		now := clk.Now()
		expired := cur.live && cur.exp != 0 && cur.exp <= now
		var what string
		switch op := rng.IntN(20); {
		case op < 8: // a write acknowledged from memory
			var exp int64
			if rng.IntN(3) == 0 {
				exp = int64(1 + rng.IntN(5))
			}
			what = fmt.Sprintf("upsert %v expiry %d at none", mk, exp)
			if _, err := c.Upsert(ctx, mk.key, []byte(`1`), &WriteOptions{Expiry: exp}); err != nil {
				t.Fatalf("step %d, %s: %v", step, what, err)
			}
			model[mk] = countsModelKey{live: true, exp: expiryAt(now, exp)}
			dirty[mk] = true
		case op < 11: // a delete acknowledged from memory
			if !cur.live || expired {
				continue // a read would expire it first; the get step does that
			}
			what = fmt.Sprintf("delete %v at none", mk)
			if _, err := c.Delete(ctx, mk.key, nil); err != nil {
				t.Fatalf("step %d, %s: %v", step, what, err)
			}
			model[mk] = countsModelKey{}
			dirty[mk] = true
		case op < 12: // a write that waits for disk: every write before it commits
			what = fmt.Sprintf("upsert %v at persistToMajority", mk)
			if _, err := c.Upsert(ctx, mk.key, []byte(`2`), &WriteOptions{Durability: DurabilityPersistToMajority}); err != nil {
				t.Fatalf("step %d, %s: %v", step, what, err)
			}
			model[mk] = countsModelKey{live: true}
			commit(what)
		case op < 14: // a read, which expires what it finds expired
			what = fmt.Sprintf("get %v", mk)
			_, err := c.Get(ctx, mk.key)
			switch {
			case expired:
				if !errors.Is(err, ErrExpired) {
					t.Fatalf("step %d, %s, expired: %v, want ErrExpired", step, what, err)
				}
				if !dirty[mk] {
					// The expiration is queued for disk at once and its
					// writer does not wait: its commit (and that of every
					// write before it) starts now, so the model takes it
					// as done.
					model[mk] = countsModelKey{}
					commit(what)
				}
			case cur.live:
				if err != nil {
					t.Fatalf("step %d, %s: %v", step, what, err)
				}
			default:
				if !errors.Is(err, ErrNotFound) {
					t.Fatalf("step %d, %s, not live: %v, want ErrNotFound", step, what, err)
				}
			}
		case op < 16:
			what = "clock +1..3 s"
			clk.Advance(int64(1 + rng.IntN(3)))
		case op < 17: // the pager
			what = "pager"
			if _, _, err := b.ExpireBatch(ctx, 1000); err != nil {
				t.Fatalf("step %d, %s: %v", step, what, err)
			}
			for k, v := range model {
				if v.live && v.exp != 0 && v.exp <= now && !dirty[k] {
					model[k] = countsModelKey{}
				}
			}
			commit(what)
		case op < 18:
			what = "commit"
			commit(what)
		default: // a commit that fails: what it held is lost
			what = "failed commit"
			fs.setErr(errors.New("injected commit failure"))
			err := b.Sync(ctx)
			fs.setErr(nil)
			if err != nil && !errors.Is(err, ErrStorage) {
				t.Fatalf("step %d, %s: %v", step, what, err)
			}
			for b.store.failure() != nil {
				if ctx.Err() != nil {
					t.Fatal("the store never took writes again")
				}
				time.Sleep(time.Millisecond) // the store's probe, on its own timer
			}
			clear(dirty)
			model = make(map[mkey]countsModelKey, len(committed))
			for k, v := range committed {
				model[k] = v
			}
		}
		want := make([]int64, len(colls))
		var total int64
		for k, v := range model {
			if v.live {
				want[k.c]++
				total++
			}
		}
		if got := b.Stats().CurrItems; got != total {
			t.Fatalf("step %d, after %s: curr_items %d, want %d (the keys a reader finds live)", step, what, got, total)
		}
		if got := b.ItemsIn(nil); got != total {
			t.Fatalf("step %d, after %s: the partitions count %d items, want %d", step, what, got, total)
		}
		for i, c := range colls {
			if got := c.Count(); got != want[i] {
				t.Fatalf("step %d, after %s: collection %d counts %d, want %d", step, what, i, got, want[i])
			}
		}
	}
	if err := b.Check(ctx); err != nil {
		t.Fatal(err)
	}
}

// expiryAt is the expiration of a document written at now with a relative
// expiry of exp seconds (0: none).
func expiryAt(now, exp int64) int64 {
	if exp == 0 {
		return 0
	}
	return now + exp
}
