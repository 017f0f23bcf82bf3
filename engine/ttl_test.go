package engine_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
)

// ttlColl makes scope s, collection c with the given settings in a fresh
// bucket of type typ.
func ttlColl(t *testing.T, typ engine.BucketType, bucketMaxTTL int64, cs engine.CollectionSettings) (*engine.Bucket, *engine.Collection, *engine.FakeClock) {
	t.Helper()
	ctx := context.Background()
	eng, clk := newEngine(t, t.TempDir())
	b, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "b", Type: typ, MaxTTL: bucketMaxTTL})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.CreateScope(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateCollectionWith(ctx, "s", "c", cs); err != nil {
		t.Fatal(err)
	}
	c, err := b.Collection("s", "c")
	if err != nil {
		t.Fatal(err)
	}
	return b, c, clk
}

// TestTTLPrecedence is the golden table of a write's expiration: request
// expiry > the document's ttl field > the collection's defaultTTL > none,
// then the collection's (or bucket's) maxTTL caps.
func TestTTLPrecedence(t *testing.T) {
	const off = 0
	cases := []struct {
		name       string
		reqExpiry  int64
		body       string
		defaultTTL int64
		collMaxTTL int64
		bucketMax  int64
		want       int64 // seconds from now; 0 never; -1 expired at once
	}{
		{"nothing", 0, `{}`, off, 0, 0, 0},
		{"ttl field ignored when defaultTTL is off", 0, `{"ttl":10}`, off, 0, 0, 0},
		{"invalid ttl field ignored when defaultTTL is off", 0, `{"ttl":"x"}`, off, 0, 0, 0},
		{"defaultTTL -1, no field: never", 0, `{}`, -1, 0, 0, 0},
		{"defaultTTL -1, field n", 0, `{"ttl":10}`, -1, 0, 0, 10},
		{"defaultTTL n, no field", 0, `{}`, 60, 0, 0, 60},
		{"defaultTTL n, field n", 0, `{"ttl":10}`, 60, 0, 0, 10},
		{"defaultTTL n, field -1: never", 0, `{"ttl":-1}`, 60, 0, 0, 0},
		{"field beyond 30 days is still relative", 0, `{"ttl":5000000}`, -1, 0, 0, 5000000},
		{"request expiry wins over field", 20, `{"ttl":10}`, 60, 0, 0, 20},
		{"request expiry wins over defaultTTL", 20, `{}`, 60, 0, 0, 20},
		{"request expiry wins over field -1", 20, `{"ttl":-1}`, 60, 0, 0, 20},
		{"negative request expiry: expired", -1, `{"ttl":10}`, 60, 0, 0, -1},
		{"binary value: defaultTTL", 0, "\x00bin", 60, 0, 0, 60},
		{"array value: defaultTTL", 0, `[{"ttl":5}]`, 60, 0, 0, 60},
		{"collection maxTTL caps field", 0, `{"ttl":100}`, -1, 50, 0, 50},
		{"collection maxTTL caps field -1", 0, `{"ttl":-1}`, 60, 50, 0, 50},
		{"collection maxTTL caps defaultTTL", 0, `{}`, 60, 50, 0, 50},
		{"collection maxTTL above: field stands", 0, `{"ttl":10}`, 60, 50, 0, 10},
		{"bucket maxTTL caps defaultTTL", 0, `{}`, 600, 0, 100, 100},
		{"collection -1 lifts bucket maxTTL", 0, `{}`, -1, -1, 100, 0},
		{"maxTTL caps request expiry", 200, `{}`, 60, 50, 0, 50},
	}
	for _, typ := range []engine.BucketType{engine.Couchbase, engine.Ephemeral} {
		for _, tc := range cases {
			t.Run(fmt.Sprintf("%s/%s", typ, tc.name), func(t *testing.T) {
				_, c, _ := ttlColl(t, typ, tc.bucketMax, engine.CollectionSettings{MaxTTL: tc.collMaxTTL, DefaultTTL: tc.defaultTTL})
				d, err := c.Upsert(context.Background(), "k", []byte(tc.body), &engine.WriteOptions{Expiry: tc.reqExpiry})
				if err != nil {
					t.Fatal(err)
				}
				want := int64(0)
				switch {
				case tc.want > 0:
					want = t0 + tc.want
				case tc.want < 0:
					want = 1
				}
				if d.Expiration != want {
					t.Errorf("expiration = %d, want %d", d.Expiration, want)
				}
				if d.ExpiryPinned != (tc.reqExpiry != 0) {
					t.Errorf("pinned = %v, want %v", d.ExpiryPinned, tc.reqExpiry != 0)
				}
				if d.TS != t0 || d.CreatedAt != t0 {
					t.Errorf("ts, created = %d, %d; want %d", d.TS, d.CreatedAt, t0)
				}
			})
		}
	}
}

// TestDocTTLInvalid: on a collection with a defaultTTL, a ttl field that is
// not -1 or a positive integer is refused, naming the field.
func TestDocTTLInvalid(t *testing.T) {
	_, c, _ := ttlColl(t, engine.Couchbase, 0, engine.CollectionSettings{DefaultTTL: -1})
	for _, body := range []string{`{"ttl":0}`, `{"ttl":-2}`, `{"ttl":1.5}`, `{"ttl":1e3}`, `{"ttl":"10"}`, `{"ttl":null}`, `{"ttl":true}`, `{"ttl":{}}`, `{"ttl":99999999999}`} {
		_, err := c.Upsert(context.Background(), "k", []byte(body), nil)
		if !errors.Is(err, engine.ErrInvalidTTL) || !errors.Is(err, engine.ErrInvalidSetting) {
			t.Errorf("%s: err = %v, want ErrInvalidTTL", body, err)
		} else if want := "ttl field"; !contains(err.Error(), want) {
			t.Errorf("%s: error %q does not name the field", body, err)
		}
	}
	if _, err := c.Get(context.Background(), "k"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("a refused write stored something: %v", err)
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// TestTSAndCreated: ts follows every write of the value, created the first
// write since the key was missing; a touch changes neither.
func TestTSAndCreated(t *testing.T) {
	ctx := context.Background()
	_, c, clk := ttlColl(t, engine.Couchbase, 0, engine.CollectionSettings{})
	c.Upsert(ctx, "k", []byte(`{}`), nil)
	clk.Advance(10)
	d, _ := c.Replace(ctx, "k", []byte(`{"a":1}`), nil)
	if d.TS != t0+10 || d.CreatedAt != t0 {
		t.Errorf("after update: ts %d created %d", d.TS, d.CreatedAt)
	}
	clk.Advance(10)
	d, _ = c.Touch(ctx, "k", 100)
	if d.TS != t0+10 || d.CreatedAt != t0 || !d.ExpiryPinned {
		t.Errorf("after touch: ts %d created %d pinned %v", d.TS, d.CreatedAt, d.ExpiryPinned)
	}
	c.Delete(ctx, "k", nil)
	d, _ = c.Insert(ctx, "k", []byte(`{}`), nil)
	if d.CreatedAt != t0+20 {
		t.Errorf("recreated: created %d, want %d", d.CreatedAt, t0+20)
	}
}

// TestDefaultTTLReevaluation: setting, changing and removing a collection's
// defaultTTL re-writes the expiration of its documents from their last write,
// leaving pinned expirations (explicit expiry, touch) alone.
func TestDefaultTTLReevaluation(t *testing.T) {
	for _, typ := range []engine.BucketType{engine.Couchbase, engine.Ephemeral} {
		t.Run(string(typ), func(t *testing.T) {
			ctx := context.Background()
			b, c, clk := ttlColl(t, typ, 0, engine.CollectionSettings{})
			other := b.DefaultCollection()
			put := func(k, body string, exp int64) {
				t.Helper()
				if _, err := c.Upsert(ctx, k, []byte(body), &engine.WriteOptions{Expiry: exp}); err != nil {
					t.Fatal(err)
				}
			}
			put("plain", `{}`, 0)
			put("short", `{"ttl":30}`, 0)
			put("forever", `{"ttl":-1}`, 0)
			put("gone", `{"ttl":5}`, 0)
			put("bad", `{"ttl":"x"}`, 0)
			put("explicit", `{"ttl":30}`, 500)
			put("touched", `{}`, 0)
			c.Touch(ctx, "touched", 400)
			other.Upsert(ctx, "elsewhere", []byte(`{}`), nil)
			clk.Advance(10)

			type want map[string]int64 // key → expiration; -1 not found
			check := func(step string, n, wantN int, w want) {
				t.Helper()
				if n != wantN {
					t.Errorf("%s: re-evaluated %d documents, want %d", step, n, wantN)
				}
				for k, exp := range w {
					d, err := c.Peek(k)
					switch {
					case exp == -1:
						if !errors.Is(err, engine.ErrNotFound) {
							t.Errorf("%s: %s: err %v, want not found", step, k, err)
						}
					case err != nil:
						t.Errorf("%s: %s: %v", step, k, err)
					case d.Expiration != exp:
						t.Errorf("%s: %s: expiration %d, want %d", step, k, d.Expiration, exp)
					}
				}
				if d, _ := other.Peek("elsewhere"); d.Expiration != 0 {
					t.Errorf("%s: another collection's document was re-evaluated", step)
				}
			}
			set := func(v int64) int {
				t.Helper()
				ci, n, err := b.UpdateCollection(ctx, "s", "c", func(cs *engine.CollectionSettings) error { cs.DefaultTTL = v; return nil })
				if err != nil {
					t.Fatal(err)
				}
				if ci.DefaultTTL != v {
					t.Errorf("DefaultTTL = %d, want %d", ci.DefaultTTL, v)
				}
				return n
			}
			check("off", 0, 0, want{"plain": 0, "short": 0, "gone": 0, "explicit": t0 + 500, "touched": t0 + 400})
			check("set 100", set(100), 4, want{"plain": t0 + 100, "short": t0 + 30, "forever": 0, "gone": -1, "bad": t0 + 100, "explicit": t0 + 500, "touched": t0 + 400})
			check("set 100 again", set(100), 0, want{"plain": t0 + 100})
			check("change to -1", set(-1), 2, want{"plain": 0, "short": t0 + 30, "bad": 0, "explicit": t0 + 500})
			check("remove", set(0), 1, want{"plain": 0, "short": 0, "forever": 0, "explicit": t0 + 500, "touched": t0 + 400})
			// A write after a re-evaluation counts from itself.
			clk.Advance(10)
			set(50)
			d, _ := c.Upsert(ctx, "plain", []byte(`{}`), nil)
			if d.Expiration != t0+70 {
				t.Errorf("write after set: expiration %d, want %d", d.Expiration, t0+70)
			}
			if _, _, err := b.UpdateCollection(ctx, "s", "c", func(cs *engine.CollectionSettings) error { cs.MaxTTL = 5; return nil }); !errors.Is(err, engine.ErrInvalidSetting) {
				t.Errorf("changing maxTTL: %v, want ErrInvalidSetting", err)
			}
			if _, _, err := b.UpdateCollection(ctx, "s", "c", func(cs *engine.CollectionSettings) error { cs.DefaultTTL = -5; return nil }); !errors.Is(err, engine.ErrInvalidSetting) {
				t.Errorf("defaultTTL -5: %v, want ErrInvalidSetting", err)
			}
			if _, _, err := b.UpdateCollection(ctx, "s", "nope", func(cs *engine.CollectionSettings) error { return nil }); !errors.Is(err, engine.ErrCollectionNotFound) {
				t.Errorf("missing collection: %v", err)
			}
		})
	}
}

// TestReevaluationMaxTTL: a re-evaluation keeps the maxTTL cap counted from
// the last write.
func TestReevaluationMaxTTL(t *testing.T) {
	ctx := context.Background()
	b, c, clk := ttlColl(t, engine.Couchbase, 0, engine.CollectionSettings{MaxTTL: 100, DefaultTTL: 20})
	c.Upsert(ctx, "k", []byte(`{}`), nil)
	clk.Advance(10)
	if _, _, err := b.UpdateCollection(ctx, "s", "c", func(cs *engine.CollectionSettings) error { cs.DefaultTTL = 0; return nil }); err != nil {
		t.Fatal(err)
	}
	if d, _ := c.Peek("k"); d.Expiration != t0+100 {
		t.Errorf("expiration %d, want %d", d.Expiration, t0+100)
	}
}

// TestTTLRestart: settings and document metadata survive a restart.
func TestTTLRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	clk := engine.NewFakeClock(t0)
	open := func() *engine.Engine {
		eng, err := engine.Open(dir, &engine.Options{Clock: clk, NumPartitions: 64, NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		return eng
	}
	eng := open()
	b, _ := eng.CreateBucket(ctx, engine.BucketSettings{Name: "b"})
	b.CreateScope(ctx, "s")
	b.CreateCollectionWith(ctx, "s", "c", engine.CollectionSettings{DefaultTTL: 60, IdleTTL: 30, MaxLifetime: 90})
	c, _ := b.Collection("s", "c")
	c.Upsert(ctx, "a", []byte(`{}`), nil)
	clk.Advance(5)
	c.Upsert(ctx, "a", []byte(`{"x":1}`), nil)
	c.Upsert(ctx, "p", []byte(`{}`), &engine.WriteOptions{Expiry: 10})
	if err := eng.Check(ctx); err != nil {
		t.Fatal(err)
	}
	eng.Close()
	eng = open()
	defer closeChecked(t, eng)
	b, _ = eng.Bucket("b")
	c, err := b.Collection("s", "c")
	if err != nil {
		t.Fatal(err)
	}
	var ci engine.CollectionInfo
	for _, sc := range b.Scopes() {
		if sc.Name == "s" {
			ci = sc.Collections[0]
		}
	}
	if ci.DefaultTTL != 60 || ci.IdleTTL != 30 || ci.MaxLifetime != 90 {
		t.Errorf("settings after restart: %+v", ci)
	}
	d, _ := c.Peek("a")
	if d.TS != t0+5 || d.CreatedAt != t0 || d.ExpiryPinned || d.Expiration != t0+35 {
		t.Errorf("a after restart: ts %d created %d pinned %v exp %d", d.TS, d.CreatedAt, d.ExpiryPinned, d.Expiration)
	}
	if d, _ := c.Peek("p"); !d.ExpiryPinned {
		t.Error("p lost its pinned expiry")
	}
}

// TestSlidingExpiry: reads and writes set expiration = min(now + idleTTL,
// created + maxLifetime); Peek and pinned expirations do not slide.
func TestSlidingExpiry(t *testing.T) {
	for _, typ := range []engine.BucketType{engine.Couchbase, engine.Ephemeral} {
		t.Run(string(typ), func(t *testing.T) {
			ctx := context.Background()
			b, c, clk := ttlColl(t, typ, 0, engine.CollectionSettings{IdleTTL: 100, MaxLifetime: 250})
			d, _ := c.Upsert(ctx, "k", []byte(`{}`), nil)
			c.Upsert(ctx, "idle", []byte(`{}`), nil)
			if d.Expiration != t0+100 {
				t.Fatalf("write: expiration %d, want %d", d.Expiration, t0+100)
			}
			cas := d.CAS
			read := func(wantExp int64) {
				t.Helper()
				if _, err := c.Get(ctx, "k"); err != nil {
					t.Fatal(err)
				}
				if err := b.Sync(ctx); err != nil {
					t.Fatal(err)
				}
				d, err := c.Peek("k")
				if err != nil {
					t.Fatal(err)
				}
				if d.Expiration != wantExp {
					t.Errorf("at +%d: expiration %d, want %d", clk.Now()-t0, d.Expiration, wantExp)
				}
				if d.CAS != cas {
					t.Errorf("a sliding read changed the CAS")
				}
			}
			clk.Advance(50)
			read(t0 + 150)
			c.Peek("k")
			clk.Advance(90)
			read(t0 + 240)
			clk.Advance(90)
			read(t0 + 250) // the cap: created + maxLifetime
			d, _ = c.Replace(ctx, "k", []byte(`{"v":2}`), &engine.WriteOptions{CAS: cas})
			if d.Expiration != t0+250 || d.CreatedAt != t0 {
				t.Errorf("update: expiration %d created %d", d.Expiration, d.CreatedAt)
			}
			if got := b.Stats().SlidingExtends; got != 3 {
				t.Errorf("SlidingExtends = %d, want 3", got)
			}
			if _, err := c.Get(ctx, "idle"); !errors.Is(err, engine.ErrNotFound) {
				t.Errorf("an unread document outlived idleTTL: %v", err)
			}
			clk.Set(t0 + 250)
			if _, err := c.Get(ctx, "k"); !errors.Is(err, engine.ErrNotFound) {
				t.Errorf("a document outlived maxLifetime: %v", err)
			}
			// A touch is capped like a write's explicit expiry, by
			// min(now + idleTTL, created + maxLifetime), and pins: reads
			// leave it.
			c.Upsert(ctx, "t", []byte(`{}`), nil) // created at +250
			c.Touch(ctx, "t", 1000)
			clk.Advance(10)
			c.Get(ctx, "t")
			b.Sync(ctx)
			if d, _ := c.Peek("t"); d.Expiration != t0+350 || !d.ExpiryPinned {
				t.Errorf("touched: expiration %d pinned %v, want %d pinned", d.Expiration, d.ExpiryPinned, t0+350)
			}
			// A touch to 0 (no expiration) is capped too: at +300,
			// min(now + idleTTL, created + maxLifetime) is +400.
			clk.Advance(40)
			if d, err := c.Touch(ctx, "t", 0); err != nil || d.Expiration != t0+400 {
				t.Errorf("touched to 0: %v, want expiration %d", err, t0+400)
			}
		})
	}
}

// TestSlidingReadDoesNotWaitForDisk: a read on a sliding collection returns
// while commits are held; the extension commits afterwards.
func TestSlidingReadDoesNotWaitForDisk(t *testing.T) {
	ctx := context.Background()
	b, c, clk := ttlColl(t, engine.Couchbase, 0, engine.CollectionSettings{IdleTTL: 100})
	c.Upsert(ctx, "k", []byte(`{}`), nil)
	clk.Advance(10)
	release, err := engine.HoldCommits(b)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.Get(ctx, "k")
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute): // the disk is held until release: only a read that waits for it gets here
		release()
		t.Fatal("a sliding read waited for disk")
	}
	if d, _ := c.Peek("k"); d.Expiration != t0+100 {
		t.Errorf("the extension is visible before its commit")
	}
	release()
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if d, _ := c.Peek("k"); d.Expiration != t0+110 {
		t.Errorf("after commit: expiration %d, want %d", d.Expiration, t0+110)
	}
}

// TestSlidingWithDefaultTTLAndMaxTTL: the sliding rule never lifts the TTL
// rule or the maxTTL cap counted from the last write.
func TestSlidingWithDefaultTTLAndMaxTTL(t *testing.T) {
	ctx := context.Background()
	b, c, clk := ttlColl(t, engine.Couchbase, 0, engine.CollectionSettings{MaxTTL: 300, DefaultTTL: 200, IdleTTL: 100})
	c.Upsert(ctx, "k", []byte(`{}`), nil)
	c.Upsert(ctx, "m", []byte(`{"ttl":-1}`), nil)
	step := func(adv, wantK, wantM int64) {
		t.Helper()
		clk.Advance(adv)
		c.Get(ctx, "k")
		c.Get(ctx, "m")
		b.Sync(ctx)
		if d, err := c.Peek("k"); wantK != 0 && (err != nil || d.Expiration != t0+wantK) {
			t.Errorf("at +%d: k: %v, want expiration +%d", clk.Now()-t0, d, wantK)
		}
		if d, err := c.Peek("m"); err != nil || d.Expiration != t0+wantM {
			t.Errorf("at +%d: m: %v, want expiration +%d", clk.Now()-t0, d, wantM)
		}
	}
	step(50, 150, 150)
	step(90, 200, 240) // k: defaultTTL from the write
	step(90, 0, 300)   // m: maxTTL from the write
}
