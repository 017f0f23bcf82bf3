package engine_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
)

// list pulls every document of c.List(o), failing the test on an error.
func list(t *testing.T, c *engine.Collection, o engine.ListOptions) []string {
	t.Helper()
	var out []string
	for d, err := range c.List(context.Background(), o) {
		if err != nil {
			t.Fatalf("List(%+v): %v", o, err)
		}
		out = append(out, d.Key)
	}
	return out
}

// want is what a listing should yield from live, the live keys sorted.
func want(live []string, o engine.ListOptions) []string {
	keys := slices.Clone(live)
	if o.Descending {
		slices.Reverse(keys)
	}
	var out []string
	for _, k := range keys {
		before := func(a, b string) bool { return a < b != o.Descending && a != b } // a comes before b in reading order
		if o.Start != nil && before(k, *o.Start) {
			continue
		}
		if o.End != nil && (before(*o.End, k) || o.ExclusiveEnd && k == *o.End) {
			continue
		}
		out = append(out, k)
	}
	out = out[min(o.Skip, len(out)):]
	if o.Limit > 0 && len(out) > o.Limit {
		out = out[:o.Limit]
	}
	return out
}

func optString(o engine.ListOptions) string {
	s := func(p *string) string {
		if p == nil {
			return "-"
		}
		return *p
	}
	return fmt.Sprintf("start=%s end=%s excl=%v desc=%v skip=%d limit=%d", s(o.Start), s(o.End), o.ExclusiveEnd, o.Descending, o.Skip, o.Limit)
}

// List against a model, on every bucket type: keys spread over every
// partition and two collections, deletes, expired documents, and random
// ranges (bounds on keys and between them), directions, skips and limits;
// then again after a restart (the store's order, loaded).
func TestListModel(t *testing.T) {
	for _, typ := range []engine.BucketType{engine.Couchbase, engine.Ephemeral, engine.Memcached} {
		t.Run(string(typ), func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			eng, clk := newEngine(t, dir)
			b, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "b", Type: typ})
			if err != nil {
				t.Fatal(err)
			}
			c := b.DefaultCollection()
			var other *engine.Collection
			if typ != engine.Memcached {
				if err := b.CreateScope(ctx, "s"); err != nil {
					t.Fatal(err)
				}
				if _, err := b.CreateCollection(ctx, "s", "c", 0); err != nil {
					t.Fatal(err)
				}
				if other, err = b.Collection("s", "c"); err != nil {
					t.Fatal(err)
				}
			}
			rng := rand.New(rand.NewPCG(1, 2))
			var live []string
			for i := range 600 {
				key := fmt.Sprintf("k%04d", i*3) // gaps between keys: bounds fall on and between them
				o := &engine.WriteOptions{}
				if i%7 == 0 {
					o.Expiry = 5 // expires below
				}
				if _, err := c.Upsert(ctx, key, []byte(`{}`), o); err != nil {
					t.Fatal(err)
				}
				if other != nil && i%2 == 0 {
					if _, err := other.Upsert(ctx, key, []byte(`1`), nil); err != nil {
						t.Fatal(err)
					}
				}
				switch {
				case i%7 == 0:
				case i%5 == 0:
					if _, err := c.Delete(ctx, key, nil); err != nil {
						t.Fatal(err)
					}
				default:
					live = append(live, key)
				}
			}
			clk.Advance(10)
			if n := c.Count(); n != int64(len(live)+86) { // the 86 expired ones count until purged
				t.Errorf("Count %d, want %d live and 86 expired", n, len(live))
			}
			check := func() {
				t.Helper()
				if got := list(t, c, engine.ListOptions{}); !slices.Equal(got, live) {
					t.Fatalf("all: %d keys, want %d", len(got), len(live))
				}
				key := func() *string {
					if rng.IntN(4) == 0 {
						return nil
					}
					k := fmt.Sprintf("k%04d", rng.IntN(1900))
					return &k
				}
				for range 300 {
					o := engine.ListOptions{Start: key(), End: key(), ExclusiveEnd: rng.IntN(2) == 0, Descending: rng.IntN(2) == 0}
					if rng.IntN(2) == 0 {
						o.Skip = rng.IntN(50)
					}
					if rng.IntN(2) == 0 {
						o.Limit = 1 + rng.IntN(200)
					}
					if got, w := list(t, c, o), want(live, o); !slices.Equal(got, w) {
						t.Fatalf("%s: got %v, want %v", optString(o), got, w)
					}
				}
				// A cluster node's share: the documents of a set of
				// partitions, listed and counted. The shares of a split
				// of the partitions count the collection whole.
				for range 50 {
					in := make([]bool, b.NumPartitions())
					for i := range in {
						in[i] = rng.IntN(3) == 0
					}
					var liveIn []string
					for _, k := range live {
						if in[b.PartitionOf(k)] {
							liveIn = append(liveIn, k)
						}
					}
					o := engine.ListOptions{Start: key(), End: key(), Descending: rng.IntN(2) == 0, Partitions: in}
					if rng.IntN(2) == 0 {
						o.Skip = rng.IntN(20)
					}
					if rng.IntN(2) == 0 {
						o.Limit = 1 + rng.IntN(60)
					}
					if got, w := list(t, c, o), want(liveIn, o); !slices.Equal(got, w) {
						t.Fatalf("partitions %v, %s: got %v, want %v", in, optString(o), got, w)
					}
					rest := make([]bool, len(in))
					for i := range in {
						rest[i] = !in[i]
					}
					if n, m := c.CountIn(in), c.CountIn(rest); n+m != c.Count() || n < int64(len(liveIn)) {
						t.Fatalf("CountIn: %d + %d of the rest, want Count %d (at least %d live in the share)", n, m, c.Count(), len(liveIn))
					}
				}
				if other != nil {
					if got := list(t, other, engine.ListOptions{Limit: 2, Descending: true}); !slices.Equal(got, []string{"k1794", "k1788"}) {
						t.Errorf("the other collection: %v", got)
					}
				}
			}
			check()
			if typ != engine.Couchbase {
				return
			}
			if err := eng.Close(); err != nil {
				t.Fatal(err)
			}
			eng2, err := engine.Open(dir, &engine.Options{Clock: clk, NumPartitions: 64, NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			defer closeChecked(t, eng2)
			b, err = eng2.Bucket("b")
			if err != nil {
				t.Fatal(err)
			}
			c = b.DefaultCollection()
			if other, err = b.Collection("s", "c"); err != nil {
				t.Fatal(err)
			}
			if n := c.Count(); n != int64(len(live)+86) {
				t.Errorf("Count after a restart %d, want %d", n, len(live)+86)
			}
			check()
		})
	}
}

// A page of a listing reads what it returns from the store, not the whole
// collection.
func TestListStopsEarly(t *testing.T) {
	b, _ := newBucket(t, engine.Couchbase)
	ctx := context.Background()
	c := b.DefaultCollection()
	for i := range 5000 {
		if _, err := c.Upsert(ctx, fmt.Sprintf("k%05d", i), []byte(`1`), nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range []engine.ListOptions{{Limit: 10}, {Limit: 10, Descending: true}, {Start: ptr("k02500"), Limit: 10}, {Skip: 20, Limit: 10}} {
		before := engine.StoreKeysRead(b)
		if got := list(t, c, o); len(got) != 10 {
			t.Fatalf("%s: %d documents", optString(o), len(got))
		}
		if read := engine.StoreKeysRead(b) - before; read > 64 {
			t.Errorf("%s: read %d keys from the store for 10 documents", optString(o), read)
		}
	}
	// Pulling stops the reading too.
	before := engine.StoreKeysRead(b)
	for range c.List(ctx, engine.ListOptions{}) {
		break
	}
	if read := engine.StoreKeysRead(b) - before; read > 64 {
		t.Errorf("one document pulled read %d keys", read)
	}
}

func ptr(s string) *string { return &s }

// A write that is queued but not committed is not listed (Get does not see
// it either); once committed, it is.
func TestListSeesCommittedOnly(t *testing.T) {
	b, _ := newBucket(t, engine.Couchbase)
	ctx := context.Background()
	c := b.DefaultCollection()
	if _, err := c.Upsert(ctx, "a", []byte(`1`), nil); err != nil {
		t.Fatal(err)
	}
	hold, err := engine.HoldCommits(b)
	if err != nil {
		t.Fatal(err)
	}
	// release lets commits through again, once: on every way out, so that a
	// failure does not leave the bucket's close waiting on a held commit.
	release := sync.OnceFunc(hold)
	defer release()
	done := make(chan error, 1)
	go func() {
		_, err := c.Upsert(ctx, "b", []byte(`1`), nil)
		done <- err
	}()
	// The write waits for disk, queued or taken by the held commit.
	for deadline := time.Now().Add(time.Minute); b.Stats().QueueSize+b.Stats().FlusherTodo == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the write never queued")
		}
	}
	if got := list(t, c, engine.ListOptions{}); !slices.Equal(got, []string{"a"}) {
		t.Errorf("with b's commit held: %v", got)
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := list(t, c, engine.ListOptions{}); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("after b's commit: %v", got)
	}
}

// Writes racing a listing: a document committed before the listing and
// left alone is listed exactly once, in order, while other keys are
// written, deleted and rewritten around it.
func TestListWhileWriting(t *testing.T) {
	for _, typ := range []engine.BucketType{engine.Couchbase, engine.Ephemeral} {
		t.Run(string(typ), func(t *testing.T) {
			b, _ := newBucket(t, typ)
			ctx := context.Background()
			c := b.DefaultCollection()
			const n = 3000
			for i := range n {
				if _, err := c.Upsert(ctx, fmt.Sprintf("s%05d", 2*i), []byte(`1`), nil); err != nil {
					t.Fatal(err)
				}
			}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for w := range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := w; ; i += 2 {
						select {
						case <-stop:
							return
						default:
						}
						key := fmt.Sprintf("s%05d", 2*(i%n)+1) // odd keys come and go
						var err error
						if i%3 == 2 {
							_, err = c.Delete(ctx, key, nil)
						} else {
							_, err = c.Upsert(ctx, key, []byte(`2`), nil)
						}
						if err != nil && !errors.Is(err, engine.ErrNotFound) {
							t.Errorf("write: %v", err)
							return
						}
					}
				}()
			}
			for round := range 6 {
				o := engine.ListOptions{Descending: round%2 == 1}
				got := list(t, c, o)
				even := 0
				for i, k := range got {
					if i > 0 && (k <= got[i-1]) != o.Descending {
						t.Fatalf("round %d: %q after %q", round, k, got[i-1])
					}
					if (k[len(k)-1]-'0')%2 == 0 {
						even++
					}
				}
				if even != n {
					t.Errorf("round %d: %d of the %d documents left alone listed", round, even, n)
				}
			}
			close(stop)
			wg.Wait()
		})
	}
}
