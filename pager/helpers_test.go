package pager_test

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/pager"
)

// t0 is a fixed "now" for tests: 2023-11-14 22:13:20 UTC.
const t0 = 1_700_000_000

// newEngine opens an engine on dir (a fresh temporary folder if "") with a
// fake clock at t0; it is closed when the test ends.
func newEngine(t testing.TB, dir string) (*engine.Engine, *engine.FakeClock) {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	clk := engine.NewFakeClock(t0)
	eng, err := engine.Open(dir, &engine.Options{Clock: clk, NumPartitions: 64, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := eng.Check(context.Background()); err != nil && !errors.Is(err, engine.ErrClosed) {
			t.Errorf("engine.Check: %v", err)
		}
		eng.Close()
	})
	return eng, clk
}

// newBucket creates a bucket with the default settings (exp_pager_stime
// 3600, no initial-run hour, purgeInterval 3 days), changed by edit if not nil.
func newBucket(t testing.TB, eng *engine.Engine, name string, typ engine.BucketType, edit func(*engine.BucketSettings)) *engine.Bucket {
	t.Helper()
	s := engine.DefaultBucketSettings(name)
	s.Type = typ
	if edit != nil {
		edit(&s)
	}
	b, err := eng.CreateBucket(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// newManager returns a Manager over eng. When the test ends it is closed and
// checked for a leftover background goroutine.
func newManager(t testing.TB, eng *engine.Engine, opts *pager.Options) *pager.Manager {
	t.Helper()
	m := pager.New(eng, opts)
	t.Cleanup(func() {
		if err := m.Close(context.Background()); err != nil {
			t.Error(err)
		}
		checkNoPagerGoroutines(t)
	})
	return m
}

// checkNoPagerGoroutines fails the test if a Manager's background loop is
// still running a minute from now (a leak; a busy machine ends it sooner).
func checkNoPagerGoroutines(t testing.TB) {
	t.Helper()
	giveUp := time.After(time.Minute)
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if !bytes.Contains(buf[:n], []byte("pager.(*Manager).loop")) {
			return
		}
		select {
		case <-giveUp:
			t.Errorf("pager goroutine still running after Close:\n%s", buf[:n])
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// put upserts key with the given expiry (as a client gives it).
func put(t testing.TB, c *engine.Collection, key string, expiry int64) {
	t.Helper()
	if _, err := c.Upsert(context.Background(), key, []byte(`{"k":"`+key+`"}`), &engine.WriteOptions{Expiry: expiry}); err != nil {
		t.Fatal(err)
	}
}

// tick calls m.Tick and fails the test on an error.
func tick(t testing.TB, m *pager.Manager) {
	t.Helper()
	if err := m.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// settings returns m.Settings(bucket), failing the test on an error.
func settings(t testing.TB, m *pager.Manager, bucket string) pager.Settings {
	t.Helper()
	s, err := m.Settings(bucket)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// wantStats checks the pager-related engine statistics of b.
func wantStats(t testing.TB, b *engine.Bucket, expiredPager, runs, currItems int64) {
	t.Helper()
	s := b.Stats()
	if s.ExpiredPager != expiredPager || s.PagerRuns != runs || s.CurrItems != currItems {
		t.Fatalf("ExpiredPager=%d PagerRuns=%d CurrItems=%d, want %d %d %d",
			s.ExpiredPager, s.PagerRuns, s.CurrItems, expiredPager, runs, currItems)
	}
}

func ptr[T any](v T) *T { return &v }

// isNotFound reports whether err says the document is missing.
func isNotFound(err error) bool { return errors.Is(err, engine.ErrNotFound) }
