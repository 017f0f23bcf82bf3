package engine_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
)

// Dropping a partition's copy (one moved away from this node) removes its
// documents and tombstones from memory and the store, sets its counts and
// its sequence number back to 0, leaves the other partitions alone, and
// begins a history in which a consumer that saw the partition's changes
// must roll back. A reopened bucket holds none of it.
func TestDropPartition(t *testing.T) {
	ctx := context.Background()
	for _, kind := range []string{engine.StorageBolt, engine.StoragePebble} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			open := func() (*engine.Engine, *engine.Bucket) {
				t.Helper()
				eng, err := engine.Open(dir, &engine.Options{Clock: engine.NewFakeClock(t0), NumPartitions: 8, NoSync: true, Storage: kind})
				if err != nil {
					t.Fatal(err)
				}
				b, err := eng.Bucket("b")
				if errors.Is(err, engine.ErrBucketNotFound) {
					b, err = eng.CreateBucket(ctx, engine.BucketSettings{Name: "b", Type: engine.Couchbase})
				}
				if err != nil {
					t.Fatal(err)
				}
				return eng, b
			}
			eng, b := open()
			c := b.DefaultCollection()
			const n = 200
			part := b.PartitionOf("k0")
			var inPart, liveOut, tombsOut int
			for i := range n {
				k := fmt.Sprint("k", i)
				if _, err := c.Upsert(ctx, k, []byte(`{"i":1}`), &engine.WriteOptions{Expiry: 1000}); err != nil {
					t.Fatal(err)
				}
				if b.PartitionOf(k) == part {
					inPart++
				}
				if i%10 == 0 { // a tombstone in every partition, likely
					if _, err := c.Delete(ctx, k, nil); err != nil {
						t.Fatal(err)
					}
					if b.PartitionOf(k) != part {
						tombsOut++
					}
				} else if b.PartitionOf(k) != part {
					liveOut++
				}
			}
			if inPart == 0 || inPart == n {
				t.Fatalf("%d of %d keys in partition %d: the test needs some in and some out", inPart, n, part)
			}
			if err := b.RegisterConsumer(ctx, "view"); err != nil {
				t.Fatal(err)
			}
			seen, uuid := b.HighSeqnos(), b.UUID()
			if err := b.AckChanges("view", seen); err != nil {
				t.Fatal(err)
			}
			if err := b.DropPartition(ctx, part); err != nil {
				t.Fatal(err)
			}
			check := func(when string) {
				t.Helper()
				st := b.Stats()
				if st.CurrItems != int64(liveOut) || st.Tombstones != int64(tombsOut) {
					t.Errorf("%s: curr_items %d, tombstones %d; want %d, %d (the other partitions')", when, st.CurrItems, st.Tombstones, liveOut, tombsOut)
				}
				high := b.HighSeqnos()
				for p, s := range high {
					if p == part && s != 0 {
						t.Errorf("%s: the dropped partition's high seqno is %d, want 0", when, s)
					}
					if p != part && s != seen[p] {
						t.Errorf("%s: partition %d's high seqno is %d, was %d", when, p, s, seen[p])
					}
				}
				for i := range n {
					k := fmt.Sprint("k", i)
					_, err := c.Get(ctx, k)
					switch {
					case b.PartitionOf(k) == part && !errors.Is(err, engine.ErrNotFound):
						t.Errorf("%s: %s of the dropped partition: %v, want not found", when, k, err)
					case b.PartitionOf(k) != part && i%10 != 0 && err != nil:
						t.Errorf("%s: %s of another partition: %v", when, k, err)
					}
				}
				docs, _, err := b.Changes(nil, 10*n)
				if err != nil {
					t.Fatal(err)
				}
				for _, d := range docs {
					if b.PartitionOf(d.Key) == part {
						t.Errorf("%s: the feed still carries %s of the dropped partition", when, d.Key)
					}
				}
				// A consumer that saw the partition's changes rolls back;
				// one that saw none of them goes on.
				if err := b.CheckPosition(uuid, seen); !errors.Is(err, engine.ErrRollback) {
					t.Errorf("%s: a position that saw the dropped partition: %v, want a rollback", when, err)
				}
				other := append([]uint64(nil), seen...)
				other[part] = 0
				if err := b.CheckPosition(uuid, other); err != nil {
					t.Errorf("%s: a position that saw nothing of the partition: %v", when, err)
				}
				if err := eng.Check(ctx); err != nil {
					t.Errorf("%s: %v", when, err)
				}
			}
			check("dropped")
			if err := b.DropPartition(ctx, part); err != nil {
				t.Errorf("a second drop: %v", err)
			}
			if err := eng.Close(); err != nil {
				t.Fatal(err)
			}
			eng, b = open()
			c = b.DefaultCollection()
			check("reopened")
			// The partition starts again from sequence number 1.
			if _, err := c.Upsert(ctx, "k0", []byte(`{}`), nil); err != nil {
				t.Fatal(err)
			}
			if s := b.HighSeqnos()[part]; s != 1 {
				t.Errorf("a write after the drop has sequence number %d, want 1", s)
			}
			if err := b.DropPartition(ctx, -1); !errors.Is(err, engine.ErrInvalidOp) {
				t.Errorf("partition -1: %v", err)
			}
			closeChecked(t, eng)
		})
	}
}

// A consumer that saw two partitions whose copies were dropped one after
// the other must roll back both, even once they hold changes again: what a
// history holds of a partition is the least of where every later history
// began (the first drop's history alone still holds the second partition).
// A consumer waiting for changes is woken by a drop; one that follows the
// new history is not rolled back again.
func TestDropPartitionRollbackPartitions(t *testing.T) {
	ctx := context.Background()
	eng, err := engine.Open(t.TempDir(), &engine.Options{Clock: engine.NewFakeClock(t0), NumPartitions: 8, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer closeChecked(t, eng)
	b, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "b", Type: engine.Couchbase})
	if err != nil {
		t.Fatal(err)
	}
	c := b.DefaultCollection()
	keyIn := map[int]string{}
	for i := 0; len(keyIn) < 8; i++ {
		k := fmt.Sprint("k", i)
		if _, err := c.Upsert(ctx, k, []byte(`{}`), nil); err != nil {
			t.Fatal(err)
		}
		keyIn[b.PartitionOf(k)] = k
	}
	h := b.Consumer("view")
	seen, uuid := b.HighSeqnos(), b.UUID()
	if parts, now, err := h.RollbackPartitions(uuid, seen); err != nil || len(parts) != 0 || now != uuid {
		t.Fatalf("before any drop: %v, %d, %v; want none, %d", parts, now, err, uuid)
	}
	waited := make(chan error, 1)
	go func() { waited <- h.Wait(ctx, uuid, seen) }()
	const p, q = 2, 5
	if err := b.DropPartition(ctx, p); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("Wait: %v", err)
		}
	case <-time.After(time.Minute): // only a hang
		t.Fatal("Wait did not end when the history changed")
	}
	mid := b.UUID()
	if err := b.DropPartition(ctx, q); err != nil {
		t.Fatal(err)
	}
	// The copies join again and grow past where the consumer was.
	for range 5 {
		for _, part := range []int{p, q} {
			if _, err := c.Upsert(ctx, keyIn[part], []byte(`{}`), nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	parts, now, err := h.RollbackPartitions(uuid, seen)
	if err != nil {
		t.Fatal(err)
	}
	if now != b.UUID() || now == uuid || now == mid {
		t.Errorf("now %d, want the current history %d", now, b.UUID())
	}
	var got []int
	for _, r := range parts {
		got = append(got, r.Partition)
		if r.Held != 0 || r.Seq != seen[r.Partition] {
			t.Errorf("partition %d: seq %d held %d; want %d, 0", r.Partition, r.Seq, r.Held, seen[r.Partition])
		}
	}
	if !slices.Equal(got, []int{p, q}) {
		t.Errorf("partitions to roll back: %v, want [%d %d]", got, p, q)
	}
	// The first drop's history alone still held q.
	onlyQ := slices.Clone(seen)
	onlyQ[p] = 0
	if err := b.CheckPosition(uuid, onlyQ); !errors.Is(err, engine.ErrRollback) {
		t.Errorf("a position that saw q before its drop: %v, want a rollback", err)
	}
	// Rolled back, following the current history: nothing more.
	back := slices.Clone(seen)
	back[p], back[q] = 0, 0
	if parts, _, err := h.RollbackPartitions(now, back); err != nil || len(parts) != 0 {
		t.Errorf("rolled back: %v, %v; want nothing", parts, err)
	}
	if _, _, err := h.RollbackPartitions(12345, seen); !errors.Is(err, engine.ErrRollback) {
		t.Errorf("an unknown history: %v, want ErrRollback", err)
	}
}

// Partitions dropped together begin one history: a consumer that saw them
// all still finds its history in the failover log (which keeps 25) after
// thirty drops, and rolls back exactly those partitions; dropped one by
// one, thirty histories push its own out of the log, and only starting
// over works.
func TestDropPartitionsTogether(t *testing.T) {
	ctx := context.Background()
	eng, err := engine.Open(t.TempDir(), &engine.Options{Clock: engine.NewFakeClock(t0), NumPartitions: 64, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer closeChecked(t, eng)
	for _, together := range []bool{true, false} {
		name := fmt.Sprint("b", together)
		b, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: name, Type: engine.Couchbase})
		if err != nil {
			t.Fatal(err)
		}
		c := b.DefaultCollection()
		for i := range 1000 {
			if _, err := c.Upsert(ctx, fmt.Sprint("k", i), []byte(`{}`), nil); err != nil {
				t.Fatal(err)
			}
		}
		seen, uuid := b.HighSeqnos(), b.UUID()
		var drop []int
		for p := 0; p < 60; p += 2 {
			drop = append(drop, p)
		}
		logBefore := len(b.FailoverLog())
		if together {
			err = b.DropPartitions(ctx, drop)
		} else {
			for _, p := range drop {
				if err = b.DropPartition(ctx, p); err != nil {
					break
				}
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		parts, _, err := b.RollbackPartitions(uuid, seen)
		if !together {
			if !errors.Is(err, engine.ErrRollback) {
				t.Errorf("one by one: %v, want ErrRollback (the history left the log)", err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("together: %v", err)
		}
		if n := len(b.FailoverLog()); n != logBefore+1 {
			t.Errorf("together: the failover log has %d entries, had %d", n, logBefore)
		}
		var got []int
		for _, r := range parts {
			got = append(got, r.Partition)
		}
		if !slices.Equal(got, drop) {
			t.Errorf("together: partitions to roll back %v, want %v", got, drop)
		}
		for _, p := range drop {
			if s := b.HighSeqnos()[p]; s != 0 {
				t.Errorf("partition %d at %d after the drop", p, s)
			}
		}
	}
	if err := eng.Check(ctx); err != nil {
		t.Error(err)
	}
}
