package engine_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
)

func TestInsertReplaceCAS(t *testing.T) {
	ctx := context.Background()
	b, _ := newBucket(t, engine.Couchbase)
	c := b.DefaultCollection()
	d, err := c.Insert(ctx, "k", []byte(`{"a":1}`), &engine.WriteOptions{Flags: 3})
	if err != nil {
		t.Fatal(err)
	}
	if d.Type != engine.TypeJSON || d.RevSeq != 1 || d.Seq != 1 || d.Flags != 3 || d.CAS == 0 {
		t.Fatalf("inserted metadata: %+v", d)
	}
	if _, err := c.Insert(ctx, "k", []byte(`2`), nil); !errors.Is(err, engine.ErrKeyExists) {
		t.Fatalf("insert over existing: %v", err)
	}
	if _, err := c.Replace(ctx, "nope", []byte(`2`), nil); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("replace of missing: %v", err)
	}
	if _, err := c.Upsert(ctx, "k", []byte(`2`), &engine.WriteOptions{CAS: d.CAS + 1}); !errors.Is(err, engine.ErrCASMismatch) {
		t.Fatalf("stale cas: %v", err)
	}
	d2, err := c.Replace(ctx, "k", []byte("\x00binary"), &engine.WriteOptions{CAS: d.CAS})
	if err != nil {
		t.Fatal(err)
	}
	if d2.Type != engine.TypeBinary || d2.RevSeq != 2 || d2.CAS <= d.CAS {
		t.Fatalf("replaced metadata: %+v", d2)
	}
	if _, err := c.Delete(ctx, "k", &engine.WriteOptions{CAS: d.CAS}); !errors.Is(err, engine.ErrCASMismatch) {
		t.Fatalf("delete with stale cas: %v", err)
	}
	tomb, err := c.Delete(ctx, "k", nil)
	if err != nil || !tomb.Deleted || tomb.RevSeq != 3 {
		t.Fatalf("delete: %+v %v", tomb, err)
	}
	if _, err := c.Get(ctx, "k"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
	if _, err := c.Delete(ctx, "k", nil); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("delete twice: %v", err)
	}
	d3, err := c.Insert(ctx, "k", []byte(`3`), nil)
	if err != nil || d3.RevSeq != 4 {
		t.Fatalf("insert over tombstone: %+v %v", d3, err)
	}
	if want := fmt.Sprintf("4-%016x%08x%08x", d3.CAS, 0, 0); d3.Rev() != want {
		t.Fatalf("rev = %s, want %s", d3.Rev(), want)
	}
}

func TestLimits(t *testing.T) {
	ctx := context.Background()
	b, _ := newBucket(t, engine.Couchbase)
	c := b.DefaultCollection()
	for _, key := range []string{"", strings.Repeat("k", engine.MaxKeyLen+1), "bad\xff", "nul\x00cut"} {
		if _, err := c.Upsert(ctx, key, []byte(`1`), nil); !errors.Is(err, engine.ErrInvalidKey) {
			t.Errorf("key %q: err = %v, want ErrInvalidKey", key, err)
		}
	}
	if _, err := c.Insert(ctx, "\x00", []byte(`1`), nil); !errors.Is(err, engine.ErrInvalidKey) {
		t.Errorf("insert of a NUL key: %v", err)
	}
	if _, err := c.Upsert(ctx, strings.Repeat("k", engine.MaxKeyLen), []byte(`1`), nil); err != nil {
		t.Errorf("key of exactly %d bytes: %v", engine.MaxKeyLen, err)
	}
	if _, err := c.Upsert(ctx, "big", make([]byte, engine.MaxValueLen+1), nil); !errors.Is(err, engine.ErrValueTooLarge) {
		t.Errorf("oversized value: %v", err)
	}
	if st := b.Stats(); st.CurrItems != 1 {
		t.Errorf("a refused write changed the bucket: curr_items = %d", st.CurrItems)
	}
}

// TestRestart writes documents, tombstones, settings, scopes and collections,
// reopens the data directory and reads everything back with the same metadata.
func TestRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	clk := engine.NewFakeClock(t0)
	open := func() *engine.Engine {
		eng, err := engine.Open(dir, &engine.Options{Clock: clk, NumPartitions: 64})
		if err != nil {
			t.Fatal(err)
		}
		return eng
	}
	eng := open()
	b, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "travel", MaxTTL: 0})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "cache", Type: engine.Ephemeral}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.UpdateSettings(ctx, func(s *engine.BucketSettings) error { s.MaxTTL = 7200; s.ExpPagerStime = 10; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := b.CreateScope(ctx, "inventory"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateCollection(ctx, "inventory", "hotels", 60); err != nil {
		t.Fatal(err)
	}
	hotels, _ := b.Collection("inventory", "hotels")
	def := b.DefaultCollection()
	want := map[string]*engine.Document{}
	for i := range 200 {
		d, err := def.Upsert(ctx, fmt.Sprint("doc", i), []byte(fmt.Sprintf(`{"n":%d}`, i)), &engine.WriteOptions{Expiry: int64(i % 3 * 100), Flags: uint32(i)})
		if err != nil {
			t.Fatal(err)
		}
		want[d.Key] = d
	}
	tomb, _ := def.Delete(ctx, "doc7", nil)
	delete(want, "doc7")
	h, _ := hotels.Upsert(ctx, "h1", []byte("binary\x01"), nil)
	if err := b.PutSystemDoc(ctx, "_design/x", []byte(`{"views":{}}`)); err != nil {
		t.Fatal(err)
	}
	seqs := b.HighSeqnos()
	stats := b.Stats()
	if err := eng.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}

	eng = open()
	defer closeChecked(t, eng)
	b, err = eng.Bucket("travel")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Bucket("cache"); err != nil {
		t.Fatalf("ephemeral bucket definition lost: %v", err)
	}
	if s := b.Settings(); s.MaxTTL != 7200 || s.ExpPagerStime != 10 {
		t.Fatalf("settings after restart: %+v", s)
	}
	def = b.DefaultCollection()
	for k, w := range want {
		got, err := def.Get(ctx, k)
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		if !bytes.Equal(got.Value, w.Value) || got.CAS != w.CAS || got.RevSeq != w.RevSeq || got.Seq != w.Seq ||
			got.Flags != w.Flags || got.Expiration != w.Expiration || got.Type != w.Type || got.Partition != w.Partition {
			t.Fatalf("%s after restart: %+v, want %+v", k, got, w)
		}
	}
	if _, err := def.Get(ctx, "doc7"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("deleted doc7 came back: %v", err)
	}
	changes, _, _ := b.Changes(nil, 0)
	var sawTomb bool
	for _, d := range changes {
		if d.Key == "doc7" && d.Deleted && d.Seq == tomb.Seq && d.CAS == tomb.CAS {
			sawTomb = true
		}
	}
	if !sawTomb {
		t.Fatal("tombstone of doc7 not in the change feed after restart")
	}
	hotels, err = b.Collection("inventory", "hotels")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := hotels.Get(ctx, "h1"); err != nil || got.Type != engine.TypeBinary || got.Expiration != h.Expiration {
		t.Fatalf("collection doc after restart: %+v %v", got, err)
	}
	if v, err := b.SystemDoc("_design/x"); err != nil || string(v) != `{"views":{}}` {
		t.Fatalf("system doc after restart: %q %v", v, err)
	}
	if got := b.HighSeqnos(); fmt.Sprint(got) != fmt.Sprint(seqs) {
		t.Fatalf("seqnos after restart differ:\n%v\n%v", got, seqs)
	}
	if got := b.Stats(); got.CurrItems != stats.CurrItems || got.Tombstones != stats.Tombstones || got.WithExpiry != stats.WithExpiry {
		t.Fatalf("stats after restart %+v, before %+v", got, stats)
	}
	// New writes continue the sequence and CAS, never reusing them.
	d, _ := def.Upsert(ctx, "doc1", []byte(`1`), nil)
	if d.CAS <= want["doc1"].CAS || d.Seq <= want["doc1"].Seq {
		t.Fatalf("cas/seq went back after restart: %+v", d)
	}
	// Expired documents come back as expired and the expiry index finds them.
	clk.Advance(7200)
	n, _, err := b.ExpireBatch(ctx, 1000)
	if err != nil || int64(n) != stats.WithExpiry {
		t.Fatalf("pager after restart purged %d of %d: %v", n, stats.WithExpiry, err)
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestChangeFeed(t *testing.T) {
	ctx := context.Background()
	b, _ := newBucket(t, engine.Ephemeral)
	c := b.DefaultCollection()
	for i := range 5 {
		c.Upsert(ctx, fmt.Sprint("k", i), []byte(`1`), nil)
	}
	c.Upsert(ctx, "k1", []byte(`2`), nil)
	c.Delete(ctx, "k2", nil)
	all, seen, err := b.Changes(nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 5 {
		t.Fatalf("feed has %d entries, want 5 (one per key, latest version)", len(all))
	}
	for _, d := range all {
		if (d.Key == "k1" && string(d.Value) != "2") || (d.Key == "k2" && !d.Deleted) {
			t.Fatalf("feed shows an old version of %s: %+v", d.Key, d)
		}
	}
	rest, _, _ := b.Changes(seen, 0)
	if len(rest) != 0 {
		t.Fatalf("nothing changed, feed returned %d", len(rest))
	}
	// Limit pages through the feed without losing entries.
	var paged int
	var since []uint64
	for {
		page, next, _ := b.Changes(since, 2)
		if len(page) == 0 {
			break
		}
		paged += len(page)
		since = next
	}
	if paged != 5 {
		t.Fatalf("paged %d entries, want 5", paged)
	}
	// A waiter is woken by the next mutation.
	woke := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, time.Minute) // a hang, not a busy machine
		defer cancel()
		woke <- b.WaitChanges(wctx, seen)
	}()
	c.Upsert(ctx, "k9", []byte(`1`), nil)
	if err := <-woke; err != nil {
		t.Fatalf("WaitChanges: %v", err)
	}
	more, _, _ := b.Changes(seen, 0)
	if len(more) != 1 || more[0].Key != "k9" {
		t.Fatalf("after wake: %v", more)
	}
	// A cancelled wait returns the context's error.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := b.WaitChanges(cctx, b.HighSeqnos()); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v", err)
	}
}

// TestConcurrentReadersWriters runs writers and readers on one bucket; run it
// with -race. Every reader sees only complete versions and the final state
// matches the last write of each key.
func TestConcurrentReadersWriters(t *testing.T) {
	ctx := context.Background()
	b, _ := newBucket(t, engine.Couchbase)
	c := b.DefaultCollection()
	const writers, readers, keys, rounds = 4, 4, 50, 200
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				key := fmt.Sprint("k", (w*rounds+r)%keys)
				if _, err := c.Upsert(ctx, key, []byte(fmt.Sprintf(`{"w":%d,"r":%d}`, w, r)), &engine.WriteOptions{Expiry: 100}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	stop := make(chan struct{})
	for range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				d, err := c.Get(ctx, fmt.Sprint("k", i%keys))
				if err != nil && !errors.Is(err, engine.ErrNotFound) {
					t.Error(err)
					return
				}
				if err == nil && (d.Value[0] != '{' || d.Expiration == 0) {
					t.Errorf("torn read: %+v", d)
					return
				}
				b.Changes(nil, 10)
			}
		}()
	}
	time.Sleep(10 * time.Millisecond) // let readers start; correctness does not depend on it
	close(stop)
	wg.Wait()
	if st := b.Stats(); st.CurrItems != keys {
		t.Fatalf("curr_items = %d, want %d", st.CurrItems, keys)
	}
}

func TestBucketSettingsValidation(t *testing.T) {
	ctx := context.Background()
	eng, _ := newEngine(t, t.TempDir())
	bad := []engine.BucketSettings{
		{Name: ""}, {Name: ".hidden"}, {Name: "a/b"}, {Name: "x", Type: "weird"},
		{Name: "x", MaxTTL: -1}, {Name: "x", MaxTTL: 1 << 32},
		{Name: "x", Type: engine.Memcached, MaxTTL: 5}, {Name: "x", PurgeInterval: 100},
	}
	for _, s := range bad {
		if _, err := eng.CreateBucket(ctx, s); !errors.Is(err, engine.ErrInvalidSetting) {
			t.Errorf("%+v: err = %v, want ErrInvalidSetting", s, err)
		}
	}
	if len(eng.Buckets()) != 0 {
		t.Fatal("a refused bucket was created")
	}
	b, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "ok"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "ok"}); !errors.Is(err, engine.ErrBucketExists) {
		t.Fatalf("duplicate bucket: %v", err)
	}
	if _, _, err := b.UpdateSettings(ctx, func(s *engine.BucketSettings) error { s.MaxTTL = -5; return nil }); !errors.Is(err, engine.ErrInvalidSetting) {
		t.Fatalf("bad maxTTL update: %v", err)
	}
	if b.Settings().MaxTTL != 0 {
		t.Fatal("a refused update changed the settings")
	}
	if _, err := b.CreateCollection(ctx, "nope", "c", 0); !errors.Is(err, engine.ErrScopeNotFound) {
		t.Fatalf("collection in missing scope: %v", err)
	}
	if err := eng.DeleteBucket(ctx, "ok"); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Bucket("ok"); !errors.Is(err, engine.ErrBucketNotFound) {
		t.Fatalf("deleted bucket still there: %v", err)
	}
}
