package engine_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
)

// TestMaxTTLPrecedence walks Couchbase's precedence table: document expiry
// unset/0 or x, against collection maxTTL unset(0)/-1/y and bucket maxTTL
// unset(0)/z, for each of a couchbase and an ephemeral bucket.
func TestMaxTTLPrecedence(t *testing.T) {
	const (
		x = 100 // document expiry
		y = 50  // collection maxTTL
		z = 200 // bucket maxTTL
	)
	cases := []struct {
		docExp, collTTL, bucketTTL int64
		want                       int64 // seconds from now; 0 = never
	}{
		{0, 0, 0, 0},             // nothing set: never
		{0, 0, z, z},             // doc 0, bucket z: z
		{0, y, 0, y},             // doc 0, collection y: y
		{0, y, z, y},             // collection wins over bucket
		{0, -1, z, 0},            // collection -1: never, whatever the bucket
		{x, 0, 0, x},             // explicit expiry, no limits
		{x, 0, z, x},             // x within bucket limit
		{x, 0, 90, 90},           // x beyond bucket limit: capped
		{x, y, z, y},             // x beyond collection limit: capped
		{x, 500, z, x},           // collection limit above x: x (bucket ignored)
		{x, -1, 90, x},           // collection -1 lifts the bucket's cap
		{x, 0, x, x},             // limit equal to x
		{t0 + 100000, 0, z, z},   // an absolute expiry far away is capped too
		{t0 + 100000, -1, 0, -1}, // absolute kept as given (marker -1: absolute)
	}
	for _, typ := range []engine.BucketType{engine.Couchbase, engine.Ephemeral} {
		for i, c := range cases {
			t.Run(fmt.Sprintf("%s/%d_doc%d_coll%d_bucket%d", typ, i, c.docExp, c.collTTL, c.bucketTTL), func(t *testing.T) {
				ctx := context.Background()
				b, clk := newBucket(t, typ)
				if _, _, err := b.UpdateSettings(ctx, func(s *engine.BucketSettings) error { s.MaxTTL = c.bucketTTL; return nil }); err != nil {
					t.Fatal(err)
				}
				coll := b.DefaultCollection()
				if c.collTTL != 0 {
					if err := b.CreateScope(ctx, "s"); err != nil {
						t.Fatal(err)
					}
					if _, err := b.CreateCollection(ctx, "s", "c", c.collTTL); err != nil {
						t.Fatal(err)
					}
					var err error
					if coll, err = b.Collection("s", "c"); err != nil {
						t.Fatal(err)
					}
				}
				d, err := coll.Upsert(ctx, "k", []byte(`{}`), &engine.WriteOptions{Expiry: c.docExp})
				if err != nil {
					t.Fatal(err)
				}
				var want int64
				switch {
				case c.want == -1:
					want = c.docExp
				case c.want > 0:
					want = clk.Now() + c.want
				}
				if d.Expiration != want {
					t.Fatalf("expiration = %d, want %d", d.Expiration, want)
				}
				// The document is readable until its expiration and gone at it.
				if want != 0 {
					clk.Set(want - 1)
					if _, err := coll.Get(ctx, "k"); err != nil {
						t.Fatalf("one second before expiry: %v", err)
					}
					clk.Set(want)
					if _, err := coll.Get(ctx, "k"); !errors.Is(err, engine.ErrNotFound) {
						t.Fatalf("at expiry: err = %v, want ErrNotFound", err)
					}
				} else {
					clk.Advance(10 * 365 * 86400)
					if _, err := coll.Get(ctx, "k"); err != nil {
						t.Fatalf("never-expiring document after 10 years: %v", err)
					}
				}
			})
		}
	}
}

// TestExpiryValueRules checks relative, absolute, past and negative expiries.
func TestExpiryValueRules(t *testing.T) {
	cases := []struct {
		name    string
		expiry  int64
		want    int64 // absolute expiration
		expired bool  // expired at once
	}{
		{"none", 0, 0, false},
		{"relative 1s", 1, t0 + 1, false},
		{"relative 30 days", engine.MaxRelativeExpiry, t0 + engine.MaxRelativeExpiry, false},
		{"30 days + 1 is absolute, long past", engine.MaxRelativeExpiry + 1, engine.MaxRelativeExpiry + 1, true},
		{"absolute future", t0 + 500, t0 + 500, false},
		{"absolute past", t0 - 500, t0 - 500, true},
		{"absolute now", t0, t0, true},
		{"negative", -1, 1, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			b, _ := newBucket(t, engine.Ephemeral)
			coll := b.DefaultCollection()
			d, err := coll.Upsert(ctx, "k", []byte("v"), &engine.WriteOptions{Expiry: c.expiry})
			if err != nil {
				t.Fatal(err)
			}
			if d.Expiration != c.want {
				t.Fatalf("expiration = %d, want %d", d.Expiration, c.want)
			}
			_, err = coll.Get(ctx, "k")
			if got := errors.Is(err, engine.ErrExpired); got != c.expired {
				t.Fatalf("expired at once = %v (err %v), want %v", got, err, c.expired)
			}
			if st := b.Stats(); c.expired && (st.ExpiredAccess != 1 || st.CurrItems != 0 || st.Tombstones != 1) {
				t.Fatalf("after lazy expiry: %+v", st)
			}
		})
	}
}

// TestExpiredStillCounted: an expired document counts in curr_items until a
// read or the pager removes it, and the pager finds only what is due.
func TestExpiredStillCounted(t *testing.T) {
	ctx := context.Background()
	b, clk := newBucket(t, engine.Couchbase)
	coll := b.DefaultCollection()
	for i := range 10 {
		exp := int64(0)
		if i < 4 {
			exp = 10
		}
		if _, err := coll.Upsert(ctx, fmt.Sprint("k", i), []byte(`1`), &engine.WriteOptions{Expiry: exp}); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(10)
	if st := b.Stats(); st.CurrItems != 10 || st.WithExpiry != 4 {
		t.Fatalf("before any purge: %+v", st)
	}
	if _, err := coll.Get(ctx, "k0"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("get of expired k0: %v", err)
	}
	n, more, err := b.ExpireBatch(ctx, 2)
	if err != nil || n != 2 || !more {
		t.Fatalf("first batch: n=%d more=%v err=%v", n, more, err)
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	n, more, err = b.ExpireBatch(ctx, 2)
	if err != nil || n != 1 || more {
		t.Fatalf("second batch: n=%d more=%v err=%v", n, more, err)
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	st := b.Stats()
	if st.CurrItems != 6 || st.ExpiredAccess != 1 || st.ExpiredPager != 3 || st.Expired != 4 || st.Tombstones != 4 {
		t.Fatalf("after purge: %+v", st)
	}
}

// TestPreserveExpiry: a mutation without an expiry resets it unless asked to
// preserve it; touch changes only the expiry.
func TestPreserveExpiry(t *testing.T) {
	ctx := context.Background()
	b, _ := newBucket(t, engine.Ephemeral)
	c := b.DefaultCollection()
	d1, _ := c.Upsert(ctx, "k", []byte(`1`), &engine.WriteOptions{Expiry: 100, Flags: 7})
	d2, err := c.Upsert(ctx, "k", []byte(`2`), &engine.WriteOptions{PreserveExpiry: true})
	if err != nil || d2.Expiration != d1.Expiration {
		t.Fatalf("preserved expiry %d, want %d (%v)", d2.Expiration, d1.Expiration, err)
	}
	d3, _ := c.Upsert(ctx, "k", []byte(`3`), nil)
	if d3.Expiration != 0 {
		t.Fatalf("plain upsert kept expiry %d", d3.Expiration)
	}
	d4, _ := c.Upsert(ctx, "new", []byte(`1`), &engine.WriteOptions{Expiry: 5, PreserveExpiry: true})
	if d4.Expiration != t0+5 {
		t.Fatalf("preserve on a new document: expiration %d, want %d", d4.Expiration, t0+5)
	}
	d5, err := c.Touch(ctx, "k", 60)
	if err != nil || d5.Expiration != t0+60 || string(d5.Value) != "3" || d5.CAS == d3.CAS || d5.Seq <= d3.Seq {
		t.Fatalf("touch: %+v %v", d5, err)
	}
	if _, err := c.Touch(ctx, "missing", 60); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("touch missing: %v", err)
	}
}

// TestTombstonePurge: tombstones go only after the purge interval and only
// once every change-feed consumer has consumed them; Peek never purges.
func TestTombstonePurge(t *testing.T) {
	ctx := context.Background()
	b, clk := newBucket(t, engine.Couchbase)
	c := b.DefaultCollection()
	c.Upsert(ctx, "a", []byte(`1`), nil)
	c.Upsert(ctx, "b", []byte(`1`), &engine.WriteOptions{Expiry: 5})
	c.Delete(ctx, "a", nil)
	clk.Advance(5)
	if _, err := c.Peek("b"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("peek of expired b: %v", err)
	}
	if st := b.Stats(); st.CurrItems != 1 || st.ExpiredAccess != 0 {
		t.Fatalf("peek purged: %+v", st)
	}
	if n, _, _ := b.ExpireBatch(ctx, 10); n != 1 {
		t.Fatalf("pager purged %d", n)
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	before := b.HighSeqnos()
	if err := b.AckChanges("view", make([]uint64, b.NumPartitions())); err != nil {
		t.Fatal(err)
	}
	if n, _, err := b.PurgeTombstones(ctx, clk.Now(), 10); err != nil || n != 0 {
		t.Fatalf("purged %d tombstones a consumer has not seen (err %v)", n, err)
	}
	if err := b.AckChanges("view", before); err != nil {
		t.Fatal(err)
	}
	if n, _, err := b.PurgeTombstones(ctx, clk.Now()-10, 10); err != nil || n != 0 {
		t.Fatalf("purged %d tombstones younger than the interval (err %v)", n, err)
	}
	n, more, err := b.PurgeTombstones(ctx, clk.Now(), 1)
	if err != nil || n != 1 || !more {
		t.Fatalf("first purge: %d %v %v", n, more, err)
	}
	n, more, err = b.PurgeTombstones(ctx, clk.Now(), 10)
	if err != nil || n != 1 || more {
		t.Fatalf("second purge: %d %v %v", n, more, err)
	}
	if st := b.Stats(); st.Tombstones != 0 || st.MetaDataPurged != 2 {
		t.Fatalf("after purge: %+v", st)
	}
	if got, _, _ := b.Changes(nil, 0); len(got) != 0 {
		t.Fatalf("purged tombstones still in the feed: %d", len(got))
	}
}

// TestExpirationsAfterRestart: expirations are durable. After a restart a
// document the pager purged stays purged (not counted, nothing left for the
// pager), its sequence number is not reused, and a document created again
// over it keeps its new state.
func TestExpirationsAfterRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	clk := engine.NewFakeClock(t0)
	open := func() (*engine.Engine, *engine.Bucket) {
		eng, err := engine.Open(dir, &engine.Options{Clock: clk, NumPartitions: 8})
		if err != nil {
			t.Fatal(err)
		}
		b, err := eng.Bucket("b")
		if err != nil {
			if b, err = eng.CreateBucket(ctx, engine.BucketSettings{Name: "b"}); err != nil {
				t.Fatal(err)
			}
		}
		return eng, b
	}
	eng, b := open()
	c := b.DefaultCollection()
	c.Upsert(ctx, "gone", []byte(`1`), &engine.WriteOptions{Expiry: 10})
	c.Upsert(ctx, "back", []byte(`1`), &engine.WriteOptions{Expiry: 10})
	c.Upsert(ctx, "stays", []byte(`1`), nil)
	clk.Advance(10)
	if n, _, err := b.ExpireBatch(ctx, 10); err != nil || n != 2 {
		t.Fatalf("pager: %d %v", n, err)
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	// "back" is written again after its expiration, with a later expiry.
	d, err := c.Insert(ctx, "back", []byte(`2`), &engine.WriteOptions{Expiry: 100})
	if err != nil {
		t.Fatal(err)
	}
	seqs := b.HighSeqnos()
	closeChecked(t, eng)

	eng, b = open()
	defer closeChecked(t, eng)
	c = b.DefaultCollection()
	if st := b.Stats(); st.CurrItems != 2 || st.ExpiredUnpurged != 0 || st.Tombstones != 1 {
		t.Fatalf("just after restart: %+v", st)
	}
	if _, err := c.Get(ctx, "gone"); !errors.Is(err, engine.ErrNotFound) || errors.Is(err, engine.ErrExpired) {
		t.Fatalf("purged document readable after restart: %v", err)
	}
	got, err := c.Get(ctx, "back")
	if err != nil || string(got.Value) != "2" || got.Expiration != d.Expiration {
		t.Fatalf("re-created document after restart: %+v %v", got, err)
	}
	for i, s := range b.HighSeqnos() {
		if s < seqs[i] {
			t.Fatalf("partition %d sequence went back from %d to %d", i, seqs[i], s)
		}
	}
	// Nothing is due: "gone" stays purged, and the re-created "back" left
	// no stale expiry entry behind.
	n, _, err := b.ExpireBatch(ctx, 10)
	if err != nil || n != 0 {
		t.Fatalf("pager after restart: %d %v", n, err)
	}
	if st := b.Stats(); st.CurrItems != 2 || st.WithExpiry != 1 {
		t.Fatalf("after restart: %+v", st)
	}
	clk.Advance(100)
	if n, _, _ := b.ExpireBatch(ctx, 10); n != 1 {
		t.Fatalf("re-created document not expired by the pager: %d", n)
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestPurgedExpirationStaysGone: once the metadata purge has removed an
// expiration's tombstone, its record is gone from disk too.
func TestPurgedExpirationStaysGone(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	clk := engine.NewFakeClock(t0)
	eng, err := engine.Open(dir, &engine.Options{Clock: clk, NumPartitions: 8})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := eng.CreateBucket(ctx, engine.BucketSettings{Name: "b"})
	b.DefaultCollection().Upsert(ctx, "x", []byte(`1`), &engine.WriteOptions{Expiry: 10})
	clk.Advance(10)
	b.ExpireBatch(ctx, 10)
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _, err := b.PurgeTombstones(ctx, clk.Now(), 10); err != nil || n != 1 {
		t.Fatalf("purge: %d %v", n, err)
	}
	closeChecked(t, eng)
	eng, err = engine.Open(dir, &engine.Options{Clock: clk, NumPartitions: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer closeChecked(t, eng)
	b, _ = eng.Bucket("b")
	if st := b.Stats(); st.CurrItems != 0 || st.WithExpiry != 0 || st.Tombstones != 0 {
		t.Fatalf("purged expiration came back: %+v", st)
	}
}

// TestGetOfExpiredDoesNotWaitForDisk: a get that finds a document expired
// answers while commits are held, with the document already out of
// curr_items and its collection's count (the expiration decides the
// answer; its deletion reaches disk after, as Couchbase's expiry on access
// does; a get on the memcached port's event loop waited for the commit and
// stalled the loop's other connections). A catch-up target taken after the
// get (stale=false) waits for the deletion's commit and covers it. Once
// commits flow the deletion is on disk and counted once. Fails on the code
// before: the get waited for the held commit.
func TestGetOfExpiredDoesNotWaitForDisk(t *testing.T) {
	ctx := context.Background()
	b, clk := newBucket(t, engine.Couchbase)
	coll := b.DefaultCollection()
	if _, err := coll.Upsert(ctx, "k", []byte(`1`), &engine.WriteOptions{Expiry: 10}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.Upsert(ctx, "other", []byte(`1`), nil); err != nil {
		t.Fatal(err)
	}
	before := b.HighSeqnos()
	clk.Advance(10)
	hold, err := engine.HoldCommits(b)
	if err != nil {
		t.Fatal(err)
	}
	release := sync.OnceFunc(hold)
	defer release()
	// The deadline only catches the old behaviour (a wait for the held
	// commit); the answer needs no commit at all.
	gctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for i := range 2 {
		var expired *engine.ExpiredError
		if _, err := coll.Get(gctx, "k"); !errors.As(err, &expired) || !errors.Is(err, engine.ErrNotFound) {
			t.Fatalf("get %d of the expired k with commits held: %v", i, err)
		}
	}
	if st := b.Stats(); st.CurrItems != 1 || coll.Count() != 1 {
		t.Fatalf("with the deletion queued: curr_items %d, collection count %d; want 1, 1", st.CurrItems, coll.Count())
	}
	// A consumer's catch-up target (stale=false) counts the queued
	// deletion, and waiting for it waits for its commit.
	target := b.Consumer("test").HighSeqnos()
	settled := make(chan []uint64, 1)
	go func() {
		if err := b.Consumer("test").WaitCommitted(ctx, target); err != nil {
			t.Error(err)
		}
		settled <- b.HighSeqnos()
	}()
	select {
	case <-settled:
		t.Fatal("the catch-up target was given before the queued deletion's commit")
	case <-time.After(50 * time.Millisecond): // a wrong answer comes at once; no speed is asserted
	}
	release()
	seqs := <-settled
	grew := 0
	for i := range seqs {
		if seqs[i] > before[i] {
			grew++
		}
	}
	if grew != 1 || !slices.Equal(seqs, target) {
		t.Fatalf("once the wait ends, the committed high sequence numbers pass those before the get in %d partitions (want 1, the deletion's) and are the target: %v", grew, slices.Equal(seqs, target))
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if st := b.Stats(); st.ExpiredAccess != 1 || st.CurrItems != 1 || st.Tombstones != 1 || coll.Count() != 1 {
		t.Fatalf("after the commit: expired on access %d, items %d, tombstones %d, count %d; want 1, 1, 1, 1", st.ExpiredAccess, st.CurrItems, st.Tombstones, coll.Count())
	}
	if err := b.Check(ctx); err != nil {
		t.Fatal(err)
	}
}
