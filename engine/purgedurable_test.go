package engine_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// purgeView is what a user sees of a bucket whose expired documents were
// purged: the counts, each key as Get answers it, the change feed and the
// high sequence numbers. A restart must change none of it.
type purgeView struct {
	CurrItems, Tombstones, ExpiredUnpurged, WithExpiry int64
	Gets                                               map[string]string
	Feed                                               []feedRow
	High                                               []uint64
}

// feedRow is one change-feed entry, as the feed's readers see it.
type feedRow struct {
	Key, Rev, Value                 string
	Seq, CAS, RevSeq                uint64
	Deleted, Expired                bool
	Expiration, DeletedAt, TS, Made int64
}

// viewPurges reads v of b. Its reads are Gets of keys that are live or
// tombstones (nothing expired-unpurged), which change nothing.
func viewPurges(t *testing.T, b *engine.Bucket, keys []string) purgeView {
	t.Helper()
	st := b.Stats()
	v := purgeView{CurrItems: st.CurrItems, Tombstones: st.Tombstones, ExpiredUnpurged: st.ExpiredUnpurged, WithExpiry: st.WithExpiry,
		Gets: map[string]string{}, High: b.HighSeqnos()}
	c := b.DefaultCollection()
	for _, k := range keys {
		d, err := c.Get(context.Background(), k)
		switch {
		case errors.Is(err, engine.ErrExpired):
			t.Fatalf("Get %s found it expired and unpurged", k)
		case errors.Is(err, engine.ErrNotFound):
			v.Gets[k] = "not found"
		case err != nil:
			t.Fatalf("Get %s: %v", k, err)
		default:
			v.Gets[k] = fmt.Sprintf("%s rev %s", d.Value, d.Rev())
		}
	}
	docs, _, err := b.Changes(nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		v.Feed = append(v.Feed, feedRow{Key: d.Key, Rev: d.Rev(), Value: string(d.Value), Seq: d.Seq, CAS: d.CAS, RevSeq: d.RevSeq,
			Deleted: d.Deleted, Expired: d.Expired, Expiration: d.Expiration, DeletedAt: d.DeletedAt, TS: d.TS, Made: d.CreatedAt})
	}
	return v
}

// TestPurgesSurviveRestart: documents the pager purged and one a read
// purged (lazy expiry) stay purged across a clean restart and a crash: the
// counts, reads, the change feed (with its expiration rows) and Check are
// the same before and after. (Expirations used to be written as their
// sequence number alone and came back as expired, unpurged documents.)
func TestPurgesSurviveRestart(t *testing.T) {
	for _, crash := range []bool{false, true} {
		t.Run(map[bool]string{false: "clean", true: "crash"}[crash], func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			clk := engine.NewFakeClock(t0)
			open := func(dir string) *engine.Engine {
				eng, err := engine.Open(dir, &engine.Options{Clock: clk, NumPartitions: 8})
				if err != nil {
					t.Fatal(err)
				}
				return eng
			}
			eng := open(dir)
			b, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "b", Type: engine.Couchbase})
			if err != nil {
				t.Fatal(err)
			}
			c := b.DefaultCollection()
			var keys []string
			upsert := func(k, v string, expiry int64) {
				t.Helper()
				if _, err := c.Upsert(ctx, k, []byte(v), &engine.WriteOptions{Expiry: expiry}); err != nil {
					t.Fatal(err)
				}
				keys = append(keys, k)
			}
			for i := range 40 {
				upsert(fmt.Sprint("paged", i), fmt.Sprintf(`{"n":%d}`, i), 10)
			}
			upsert("lazy", `"read"`, 10)
			upsert("binary", "\x00\x01", 10)
			upsert("stays", `{}`, 0)
			upsert("later", `{}`, 1000)
			upsert("deleted", `{}`, 10)
			if _, err := c.Delete(ctx, "deleted", nil); err != nil {
				t.Fatal(err)
			}
			clk.Advance(10)
			if _, err := c.Get(ctx, "lazy"); !errors.Is(err, engine.ErrExpired) {
				t.Fatalf("lazy expiry: %v", err)
			}
			if n, _, err := b.ExpireBatch(ctx, 100); err != nil || n != 41 {
				t.Fatalf("pager: %d, %v", n, err)
			}
			if err := b.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			before := viewPurges(t, b, keys)
			if before.CurrItems != 2 || before.ExpiredUnpurged != 0 || before.Tombstones != 43 {
				t.Fatalf("before the restart: %+v", before)
			}
			if err := eng.Check(ctx); err != nil {
				t.Fatal(err)
			}

			reopenAt := dir
			if crash {
				reopenAt = t.TempDir()
				copyDir(t, dir, reopenAt) // what kill -9 now would leave
				if err := eng.Close(); err != nil {
					t.Fatal(err)
				}
			} else {
				closeChecked(t, eng)
			}
			eng = open(reopenAt)
			defer closeChecked(t, eng)
			if b, err = eng.Bucket("b"); err != nil {
				t.Fatal(err)
			}
			if err := eng.Check(ctx); err != nil {
				t.Fatalf("Check after the restart: %v", err)
			}
			after := viewPurges(t, b, keys)
			if !reflect.DeepEqual(after, before) {
				t.Fatalf("the restart changed the bucket:\nbefore %+v\nafter  %+v", before, after)
			}
			// Nothing is left for the pager, and the tombstones purge as
			// before.
			if n, _, err := b.ExpireBatch(ctx, 100); err != nil || n != 0 {
				t.Fatalf("pager after the restart: %d, %v", n, err)
			}
			if n, _, err := b.PurgeTombstones(ctx, clk.Now(), 100); err != nil || n != 43 {
				t.Fatalf("metadata purge after the restart: %d, %v", n, err)
			}
		})
	}
}

// TestUncommittedExpirationsAfterCrash: expirations queued but not yet on
// disk at a crash are lost with it, as any uncommitted write is: the
// documents are back as expired and unpurged (as they were before the
// pager ran), and the next run purges them for good.
func TestUncommittedExpirationsAfterCrash(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	clk := engine.NewFakeClock(t0)
	eng, err := engine.Open(dir, &engine.Options{Clock: clk, NumPartitions: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer closeChecked(t, eng)
	b, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "b", Type: engine.Couchbase})
	if err != nil {
		t.Fatal(err)
	}
	c := b.DefaultCollection()
	for i := range 5 {
		if _, err := c.Upsert(ctx, fmt.Sprint("k", i), []byte(`{}`), &engine.WriteOptions{Expiry: 10}); err != nil {
			t.Fatal(err)
		}
	}
	high := b.HighSeqnos()
	clk.Advance(10)
	release, err := engine.HoldCommits(b)
	if err != nil {
		t.Fatal(err)
	}
	if n, _, err := b.ExpireBatch(ctx, 100); err != nil || n != 5 {
		release()
		t.Fatalf("pager: %d, %v", n, err)
	}
	crashed := t.TempDir()
	copyDir(t, dir, crashed)
	release()

	eng2, err := engine.Open(crashed, &engine.Options{Clock: clk, NumPartitions: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer closeChecked(t, eng2)
	b2, err := eng2.Bucket("b")
	if err != nil {
		t.Fatal(err)
	}
	if st := b2.Stats(); st.CurrItems != 5 || st.ExpiredUnpurged != 5 || !reflect.DeepEqual(b2.HighSeqnos(), high) {
		t.Fatalf("after a crash before the expirations' commit: %+v, high %v, want %v", st, b2.HighSeqnos(), high)
	}
	if n, _, err := b2.ExpireBatch(ctx, 100); err != nil || n != 5 {
		t.Fatalf("pager after the crash: %d, %v", n, err)
	}
	if err := b2.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if st := b2.Stats(); st.CurrItems != 0 || st.ExpiredUnpurged != 0 || st.Tombstones != 5 {
		t.Fatalf("after the pager: %+v", st)
	}
}
