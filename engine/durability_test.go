package engine_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
)

// newLevelBucket returns a couchbase bucket with the given durabilityMinLevel
// on an engine whose flusher waits an hour before committing writes
// acknowledged from memory: such a write stays uncommitted until something
// (a durable write, Sync, Close) makes the flusher commit, so the tests see
// the difference between the levels without timing anything.
func newLevelBucket(t *testing.T, dir string, min engine.Durability) (*engine.Engine, *engine.Bucket) {
	t.Helper()
	eng, err := engine.Open(dir, &engine.Options{Clock: engine.NewFakeClock(t0), NumPartitions: 16, NoSync: true, FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeChecked(t, eng) })
	b, err := eng.Bucket("b")
	if errors.Is(err, engine.ErrBucketNotFound) {
		b, err = eng.CreateBucket(context.Background(), engine.BucketSettings{Name: "b", DurabilityMinLevel: min})
	}
	if err != nil {
		t.Fatal(err)
	}
	return eng, b
}

// onDisk reports whether nothing waits for disk and the feed has reached
// every sequence number given out: the last write was committed when it
// was answered.
func onDisk(b *engine.Bucket) bool {
	st := b.Stats()
	return st.QueueSize == 0 && st.FlusherTodo == 0
}

func TestDurabilityDefaultsAndValidation(t *testing.T) {
	_, b := newLevelBucket(t, t.TempDir(), "")
	if got := b.Settings().DurabilityMinLevel; got != engine.DurabilityPersistToMajority {
		t.Errorf("couchbase bucket default durabilityMinLevel %q, want persistToMajority", got)
	}
	for _, tc := range []struct {
		typ   engine.BucketType
		level engine.Durability
		ok    bool
	}{
		{engine.Couchbase, "none", true},
		{engine.Couchbase, "majorityAndPersistActive", true},
		{engine.Couchbase, "persistToMajority", true},
		{engine.Couchbase, "durable", false},
		{engine.Couchbase, "PersistToMajority", false},
		{engine.Ephemeral, "majority", true},
		{engine.Ephemeral, "persistToMajority", false},
		{engine.Memcached, "none", true},
		{engine.Memcached, "majority", false},
	} {
		s := engine.DefaultBucketSettings("x")
		s.Type, s.DurabilityMinLevel = tc.typ, tc.level
		err := s.Validate()
		if tc.ok && err != nil {
			t.Errorf("%s %s: %v", tc.typ, tc.level, err)
		}
		if !tc.ok && !errors.Is(err, engine.ErrInvalidSetting) {
			t.Errorf("%s %s: err %v, want ErrInvalidSetting", tc.typ, tc.level, err)
		}
	}
	if _, err := engine.ParseDurability("majority"); err != nil {
		t.Error(err)
	}
	if _, err := engine.ParseDurability("all"); !errors.Is(err, engine.ErrInvalidDurability) {
		t.Errorf("ParseDurability(all): %v, want ErrInvalidDurability", err)
	}
}

// The setting is stored with the bucket's definition and can be changed.
func TestDurabilityMinLevelPersists(t *testing.T) {
	dir := t.TempDir()
	eng, b := newLevelBucket(t, dir, engine.DurabilityMajority)
	if _, _, err := b.UpdateSettings(context.Background(), func(s *engine.BucketSettings) error {
		s.DurabilityMinLevel = engine.DurabilityNone
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	_, b = newLevelBucket(t, dir, "")
	if got := b.Settings().DurabilityMinLevel; got != engine.DurabilityNone {
		t.Errorf("after reopen durabilityMinLevel %q, want none", got)
	}
}

// At none a write is readable at once and answered before it is on disk;
// the change feed and the high sequence numbers show it only once committed.
func TestDurabilityNoneReadableBeforeFeed(t *testing.T) {
	ctx := context.Background()
	_, b := newLevelBucket(t, t.TempDir(), engine.DurabilityNone)
	c := b.DefaultCollection()
	high := b.HighSeqnos()
	d, err := c.Upsert(ctx, "k", []byte(`{"v":1}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if onDisk(b) {
		t.Fatal("a write at none was committed before it was answered (flush interval 1h)")
	}
	got, err := c.Get(ctx, "k")
	if err != nil || string(got.Value) != `{"v":1}` || got.CAS != d.CAS {
		t.Fatalf("read-your-write at none: %v %v", got, err)
	}
	if _, err := c.Peek("k"); err != nil {
		t.Errorf("Peek of a write at none: %v", err)
	}
	if !slices.Equal(b.HighSeqnos(), high) {
		t.Error("high sequence numbers moved before the commit")
	}
	if ch, _, _ := b.Changes(high, 0); len(ch) != 0 {
		t.Errorf("change feed shows %d uncommitted writes", len(ch))
	}
	// A second write of the key, and a delete, are read at once too.
	if _, err := c.Upsert(ctx, "k", []byte(`{"v":2}`), nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.Get(ctx, "k"); got == nil || string(got.Value) != `{"v":2}` {
		t.Errorf("second write at none not read: %v", got)
	}
	if _, err := c.Delete(ctx, "k", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, "k"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("deleted at none, read gives %v", err)
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if !onDisk(b) {
		t.Error("Sync left writes queued")
	}
	ch, _, _ := b.Changes(high, 0)
	if len(ch) != 1 || ch[0].Key != "k" || !ch[0].Deleted {
		t.Errorf("feed after Sync: %v", ch)
	}
}

// levelCases is, for each bucket minimum and request level, the level a
// write gets and whether it is on disk when answered, written out rather
// than computed with Durability.Max and Persists, so that a Max that
// lowered a level fails the tests that use it.
var levelCases = []struct {
	min, req, effective engine.Durability
	persisted           bool
}{
	{"none", "", "none", false},
	{"none", "none", "none", false},
	{"none", "majority", "majority", false},
	{"none", "majorityAndPersistActive", "majorityAndPersistActive", true},
	{"none", "persistToMajority", "persistToMajority", true},
	{"majority", "", "majority", false},
	{"majority", "none", "majority", false},
	{"majority", "majority", "majority", false},
	{"majority", "majorityAndPersistActive", "majorityAndPersistActive", true},
	{"majority", "persistToMajority", "persistToMajority", true},
	{"majorityAndPersistActive", "", "majorityAndPersistActive", true},
	{"majorityAndPersistActive", "none", "majorityAndPersistActive", true},
	{"majorityAndPersistActive", "majority", "majorityAndPersistActive", true},
	{"majorityAndPersistActive", "majorityAndPersistActive", "majorityAndPersistActive", true},
	{"majorityAndPersistActive", "persistToMajority", "persistToMajority", true},
	{"persistToMajority", "", "persistToMajority", true},
	{"persistToMajority", "none", "persistToMajority", true},
	{"persistToMajority", "majority", "persistToMajority", true},
	{"persistToMajority", "majorityAndPersistActive", "persistToMajority", true},
	{"persistToMajority", "persistToMajority", "persistToMajority", true},
}

// A request's level raises the bucket's minimum and never lowers it: each
// write, at each request level over each minimum, is on disk when answered
// exactly as levelCases says.
func TestDurabilityRequestRaisesNeverLowers(t *testing.T) {
	ctx := context.Background()
	buckets := map[engine.Durability]*engine.Bucket{}
	for _, tc := range levelCases {
		if got := tc.req.Max(tc.min); got != tc.effective {
			t.Errorf("min %s, request %q: level %q, want %q", tc.min, tc.req, got, tc.effective)
		}
		b := buckets[tc.min]
		if b == nil {
			_, b = newLevelBucket(t, t.TempDir(), tc.min)
			buckets[tc.min] = b
		}
		c := b.DefaultCollection()
		req := tc.req
		ops := []struct {
			name string
			fn   func() error
		}{
			{"upsert", func() error {
				_, err := c.Upsert(ctx, "k", []byte(`1`), &engine.WriteOptions{Durability: req})
				return err
			}},
			{"touch", func() error {
				_, err := c.TouchWith(ctx, "k", &engine.WriteOptions{Expiry: 100, Durability: req})
				return err
			}},
			{"batch", func() error {
				return c.ApplyAll(ctx, []engine.Op{{Kind: engine.OpReplace, Key: "k", Value: []byte(`2`), Opts: engine.WriteOptions{Durability: req}}})[0].Err
			}},
			{"delete", func() error {
				_, err := c.Delete(ctx, "k", &engine.WriteOptions{Durability: req})
				return err
			}},
		}
		for _, op := range ops {
			if err := op.fn(); err != nil {
				t.Fatalf("min %s, %s at %q: %v", tc.min, op.name, req, err)
			}
			if got := onDisk(b); got != tc.persisted {
				t.Errorf("min %s, request %q, %s: on disk when answered %v, want %v", tc.min, req, op.name, got, tc.persisted)
			}
			if err := b.Sync(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// A clean close commits what waits for the flush interval: nothing
// acknowledged at none is lost to a shutdown.
func TestDurabilityNoneSurvivesCleanClose(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	eng, b := newLevelBucket(t, dir, engine.DurabilityNone)
	for _, k := range []string{"a", "b", "c"} {
		if _, err := b.DefaultCollection().Upsert(ctx, k, []byte(`1`), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	_, b = newLevelBucket(t, dir, "")
	for _, k := range []string{"a", "b", "c"} {
		if _, err := b.DefaultCollection().Get(ctx, k); err != nil {
			t.Errorf("%s after a clean close: %v", k, err)
		}
	}
}

// Writes at none reach disk on their own within the flush interval.
func TestDurabilityNoneFlushesWithinInterval(t *testing.T) {
	ctx := context.Background()
	eng, err := engine.Open(t.TempDir(), &engine.Options{Clock: engine.NewFakeClock(t0), NumPartitions: 16, NoSync: true, FlushInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeChecked(t, eng) })
	b, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "b", DurabilityMinLevel: engine.DurabilityNone})
	if err != nil {
		t.Fatal(err)
	}
	high := b.HighSeqnos()
	if _, err := b.DefaultCollection().Upsert(ctx, "k", []byte(`1`), nil); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute) // a hang, not a busy machine
	defer cancel()
	if err := b.WaitChanges(wctx, high); err != nil {
		t.Fatalf("a write at none never reached the feed: %v", err)
	}
	if n := b.Stats().CommitNum; n < 1 {
		t.Errorf("ep_commit_num %d after a commit", n)
	}
}

// At none a listing reads its acknowledged writes as Get does: a new key
// not yet on disk is listed in its place, in either order and within
// bounds and limits, an update shows its new value, a delete hides its key,
// and no key is listed twice, without forcing a commit; after the flush
// the listing is the same.
func TestDurabilityNoneListsAcknowledged(t *testing.T) {
	ctx := context.Background()
	_, b := newLevelBucket(t, t.TempDir(), engine.DurabilityNone)
	c := b.DefaultCollection()
	for _, k := range []string{"b", "d", "f"} {
		if _, err := c.Upsert(ctx, k, []byte(`"old"`), &engine.WriteOptions{Durability: engine.DurabilityPersistToMajority}); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"a", "b", "c", "e", "g"} {
		if _, err := c.Upsert(ctx, k, []byte(`"new"`), nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Delete(ctx, "d", nil); err != nil {
		t.Fatal(err)
	}
	if onDisk(b) {
		t.Fatal("writes at none were committed before the listing (flush interval 1h)")
	}
	check := func(when string) {
		t.Helper()
		for _, tc := range []struct {
			o    engine.ListOptions
			want []string
		}{
			{engine.ListOptions{}, []string{"a", "b", "c", "e", "f", "g"}},
			{engine.ListOptions{Descending: true}, []string{"g", "f", "e", "c", "b", "a"}},
			{engine.ListOptions{Start: ptr("b"), End: ptr("e"), ExclusiveEnd: true}, []string{"b", "c"}},
			{engine.ListOptions{Descending: true, Start: ptr("f"), Skip: 1, Limit: 2}, []string{"e", "c"}},
		} {
			var got []string
			for d, err := range c.List(ctx, tc.o) {
				if err != nil {
					t.Fatalf("%s: List(%s): %v", when, optString(tc.o), err)
				}
				got = append(got, d.Key)
				if v := map[bool]string{true: `"old"`, false: `"new"`}[d.Key == "f"]; string(d.Value) != v {
					t.Errorf("%s: List(%s) shows %s = %s, want %s", when, optString(tc.o), d.Key, d.Value, v)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("%s: List(%s) = %v, want %v", when, optString(tc.o), got, tc.want)
			}
		}
	}
	check("before the flush")
	if onDisk(b) {
		t.Error("the listings committed the writes at none: a listing must read them, not force a commit")
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	check("after the flush")
}

// A write's level must be one of the four names, on a memcached bucket
// none (Couchbase has no durable writes there), and on an ephemeral bucket,
// which keeps nothing on disk, none or majority, as
// Couchbase refuses the others there (DURABILITY_INVALID_LEVEL): before, a
// misspelt level was taken for the bucket's minimum, and a persisting one
// on an ephemeral bucket was answered as if on disk, to be lost at the
// next restart. A refused write changes nothing.
func TestDurabilityRequestRefused(t *testing.T) {
	ctx := context.Background()
	eng, err := engine.Open(t.TempDir(), &engine.Options{Clock: engine.NewFakeClock(t0), NumPartitions: 16, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeChecked(t, eng) })
	for _, tc := range []struct {
		typ engine.BucketType
		req engine.Durability
		ok  bool
	}{
		{engine.Couchbase, "PersistToMajority", false},
		{engine.Couchbase, "durable", false},
		{engine.Couchbase, engine.DurabilityPersistToMajority, true},
		{engine.Ephemeral, engine.DurabilityPersistToMajority, false},
		{engine.Ephemeral, engine.DurabilityMajorityAndPersistActive, false},
		{engine.Ephemeral, engine.DurabilityMajority, true},
		{engine.Ephemeral, engine.DurabilityUnset, true},
		{engine.Memcached, engine.DurabilityPersistToMajority, false},
		// A memcached bucket takes none alone, as its durabilityMinLevel
		// does: Couchbase offers no durable writes there.
		{engine.Memcached, engine.DurabilityMajority, false},
		{engine.Memcached, engine.DurabilityNone, true},
		{engine.Memcached, engine.DurabilityUnset, true},
	} {
		name := string(tc.typ)
		b, err := eng.Bucket(name)
		if errors.Is(err, engine.ErrBucketNotFound) {
			b, err = eng.CreateBucket(ctx, engine.BucketSettings{Name: name, Type: tc.typ})
		}
		if err != nil {
			t.Fatal(err)
		}
		c := b.DefaultCollection()
		key := "k-" + string(tc.req)
		wo := &engine.WriteOptions{Durability: tc.req}
		_, uerr := c.Upsert(ctx, key, []byte(`1`), wo)
		_, terr := c.TouchWith(ctx, "there", wo)
		_, aerr := c.Apply(ctx, &engine.Op{Kind: engine.OpDelete, Key: "there", Opts: *wo})
		for what, err := range map[string]error{"upsert": uerr, "touch": terr, "delete": aerr} {
			if what != "upsert" && tc.ok && errors.Is(err, engine.ErrNotFound) {
				continue // no document "there": the level was taken
			}
			if tc.ok && err != nil {
				t.Errorf("%s bucket, %s at %q: %v", tc.typ, what, tc.req, err)
			}
			if !tc.ok && !errors.Is(err, engine.ErrInvalidDurability) {
				t.Errorf("%s bucket, %s at %q: err %v, want ErrInvalidDurability", tc.typ, what, tc.req, err)
			}
			if !tc.ok && tc.typ == engine.Memcached && !errors.Is(err, engine.ErrDurabilityNotSupported) {
				t.Errorf("%s bucket, %s at %q: err %v, want ErrDurabilityNotSupported", tc.typ, what, tc.req, err)
			}
		}
		if _, err := c.Get(ctx, key); tc.ok != (err == nil) {
			t.Errorf("%s bucket, upsert at %q: read after it %v", tc.typ, tc.req, err)
		}
	}
}

// At none a write is answered, and readable, before its commit; Couchbase
// counts it in curr_items at once (the item is in memory), and so do the
// counters that describe what reads see: curr_items, the collection's count
// (and _all_docs' total_rows from it). Before, they counted committed
// versions only, so until the flush a new key at none was readable but not
// counted, and a deleted one counted but not readable.
func TestDurabilityNoneCountsAcknowledged(t *testing.T) {
	ctx := context.Background()
	_, b := newLevelBucket(t, t.TempDir(), engine.DurabilityNone)
	c := b.DefaultCollection()
	if _, err := c.Upsert(ctx, "k", []byte(`1`), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if st := b.Stats(); st.CurrItems != 1 || c.Count() != 1 {
		t.Errorf("a new key at none, readable: curr_items %d, Count %d; want 1, 1", st.CurrItems, c.Count())
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Delete(ctx, "k", nil); err != nil {
		t.Fatal(err)
	}
	if st := b.Stats(); st.CurrItems != 0 || c.Count() != 0 {
		t.Errorf("a key deleted at none, not readable: curr_items %d, Count %d; want 0, 0", st.CurrItems, c.Count())
	}
}
