package pager_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/pager"
)

// TestPager_RunsAtDueTime: 20 documents, 10 of them expiring after 10 s.
// Nothing is purged before the pager's first run (3600 s after start); the
// run at that time purges exactly the 10, and the next run, 3600 s later,
// purges the 3 that expired in between.
func TestPager_RunsAtDueTime(t *testing.T) {
	for _, typ := range []engine.BucketType{engine.Couchbase, engine.Ephemeral} {
		t.Run(string(typ), func(t *testing.T) {
			eng, clk := newEngine(t, "")
			b := newBucket(t, eng, "b", typ, nil)
			c := b.DefaultCollection()
			for i := range 10 {
				put(t, c, fmt.Sprint("short", i), 10)
			}
			for i := range 3 {
				put(t, c, fmt.Sprint("later", i), 5000)
			}
			for i := range 7 {
				put(t, c, fmt.Sprint("keep", i), 0)
			}
			var begins, ends atomic.Int64
			m := newManager(t, eng, &pager.Options{Events: &pager.Events{
				RunBegin: func(string) { begins.Add(1) },
				RunEnd:   func(string, pager.RunResult) { ends.Add(1) },
			}})
			if s := settings(t, m, "b"); s.NextRun != t0+3600 || s.LastRun != nil || s.ExpPagerStime != 3600 || s.ExpPagerInitialRunTime != -1 {
				t.Fatalf("settings at start: %+v", s)
			}

			// Expired, but the pager is not due: nothing is purged.
			for _, now := range []int64{t0, t0 + 11, t0 + 100, t0 + 3599} {
				clk.Set(now)
				tick(t, m)
				wantStats(t, b, 0, 0, 20)
			}

			clk.Set(t0 + 3600)
			tick(t, m)
			wantStats(t, b, 10, 1, 10)
			s := settings(t, m, "b")
			if s.NextRun != t0+7200 || s.LastRun == nil || s.LastRun.Purged != 10 || s.LastRun.Start != t0+3600 || s.LastRun.End != t0+3600 || s.LastRun.Batches != 1 {
				t.Fatalf("after first run: %+v last %+v", s, s.LastRun)
			}
			if begins.Load() != 1 || ends.Load() != 1 {
				t.Fatalf("events: %d begins, %d ends", begins.Load(), ends.Load())
			}
			for i := range 10 {
				if _, err := c.Peek(fmt.Sprint("short", i)); !isNotFound(err) {
					t.Fatalf("short%d: %v, want not found", i, err)
				}
			}

			clk.Set(t0 + 7199)
			tick(t, m)
			wantStats(t, b, 10, 1, 10)

			clk.Set(t0 + 7200)
			tick(t, m)
			wantStats(t, b, 13, 2, 7)
			if st := b.Stats(); st.ExpiredAccess != 0 || st.Expired != 13 {
				t.Fatalf("stats: %+v", st)
			}
			if s := settings(t, m, "b"); s.NextRun != t0+10800 || s.LastRun.Purged != 3 {
				t.Fatalf("after second run: %+v last %+v", s, s.LastRun)
			}
		})
	}
}

// TestPager_BatchesThroughEverything: a run purges all expired documents in
// batches of Options.BatchSize.
func TestPager_BatchesThroughEverything(t *testing.T) {
	eng, clk := newEngine(t, "")
	b := newBucket(t, eng, "b", engine.Couchbase, nil)
	c := b.DefaultCollection()
	for i := range 25 {
		put(t, c, fmt.Sprint("k", i), 10)
	}
	m := newManager(t, eng, &pager.Options{BatchSize: 10})
	clk.Advance(3600)
	r, err := m.RunNow(context.Background(), "b")
	if err != nil {
		t.Fatal(err)
	}
	if r.Purged != 25 || r.Batches != 3 {
		t.Fatalf("run: %+v, want 25 purged in 3 batches", r)
	}
	wantStats(t, b, 25, 1, 0)
}

// TestSetSettings_LowerStimeReschedules: lowering exp_pager_stime from 3600
// to 10 makes the next run due 10 s from now, and it happens then, not 3600 s
// after start. Raising it again keeps the run already due (the timer only
// moves earlier).
func TestSetSettings_LowerStimeReschedules(t *testing.T) {
	ctx := context.Background()
	eng, clk := newEngine(t, "")
	b := newBucket(t, eng, "b", engine.Couchbase, nil)
	c := b.DefaultCollection()
	for i := range 5 {
		put(t, c, fmt.Sprint("k", i), 50)
	}
	m := newManager(t, eng, nil)
	if s := settings(t, m, "b"); s.NextRun != t0+3600 {
		t.Fatalf("NextRun = %d, want t0+3600", s.NextRun-t0)
	}

	clk.Set(t0 + 100)
	s, err := m.SetSettings(ctx, "b", ptr(int64(10)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.ExpPagerStime != 10 || s.NextRun != t0+110 {
		t.Fatalf("after SetSettings: %+v, want stime 10, NextRun t0+110", s)
	}
	if got := b.Settings().ExpPagerStime; got != 10 {
		t.Fatalf("bucket setting = %d, want 10 (persisted)", got)
	}

	clk.Set(t0 + 109)
	tick(t, m)
	wantStats(t, b, 0, 0, 5)
	clk.Set(t0 + 110)
	tick(t, m)
	wantStats(t, b, 5, 1, 0)
	if s := settings(t, m, "b"); s.NextRun != t0+120 {
		t.Fatalf("NextRun = t0+%d, want t0+120", s.NextRun-t0)
	}

	// Raising it keeps the run due at t0+120; the one after is 3600 later.
	s, err = m.SetSettings(ctx, "b", ptr(int64(3600)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.NextRun != t0+120 {
		t.Fatalf("after raising: NextRun = t0+%d, want t0+120", s.NextRun-t0)
	}
	clk.Set(t0 + 120)
	tick(t, m)
	if s := settings(t, m, "b"); s.NextRun != t0+3720 || b.Stats().PagerRuns != 2 {
		t.Fatalf("NextRun = t0+%d, runs %d; want t0+3720, 2", s.NextRun-t0, b.Stats().PagerRuns)
	}
}

// TestSetSettings_ReturnsOld: UpdateSettings returns the settings before and
// after, as an audit record needs them.
func TestSetSettings_ReturnsOld(t *testing.T) {
	eng, _ := newEngine(t, "")
	newBucket(t, eng, "b", engine.Ephemeral, nil)
	m := newManager(t, eng, nil)
	old, upd, err := m.UpdateSettings(context.Background(), "b", ptr(int64(10)), ptr(5))
	if err != nil {
		t.Fatal(err)
	}
	if old.ExpPagerStime != 3600 || old.ExpPagerInitialRunTime != -1 || upd.ExpPagerStime != 10 || upd.ExpPagerInitialRunTime != 5 {
		t.Fatalf("old %+v, new %+v", old, upd)
	}
}

// TestSettings_BucketEditPickedUp: a change made on the bucket directly (a
// bucket edit through the REST API) reschedules by the same rule.
func TestSettings_BucketEditPickedUp(t *testing.T) {
	eng, clk := newEngine(t, "")
	b := newBucket(t, eng, "b", engine.Couchbase, nil)
	put(t, b.DefaultCollection(), "k", 5)
	m := newManager(t, eng, nil)
	clk.Set(t0 + 30)
	if _, _, err := b.UpdateSettings(context.Background(), func(s *engine.BucketSettings) error { s.ExpPagerStime = 20; return nil }); err != nil {
		t.Fatal(err)
	}
	if s := settings(t, m, "b"); s.ExpPagerStime != 20 || s.NextRun != t0+50 {
		t.Fatalf("settings: %+v, want stime 20, NextRun t0+50", s)
	}
	clk.Set(t0 + 50)
	tick(t, m)
	wantStats(t, b, 1, 1, 0)
}

// TestSetSettings_Disabled: exp_pager_stime 0 disables the pager: NextRun is
// 0 and no run happens however far the clock moves; RunNow still runs it,
// and enabling it again schedules a run stime from now.
func TestSetSettings_Disabled(t *testing.T) {
	ctx := context.Background()
	eng, clk := newEngine(t, "")
	b := newBucket(t, eng, "b", engine.Couchbase, nil)
	off := newBucket(t, eng, "off", engine.Ephemeral, func(s *engine.BucketSettings) { s.ExpPagerStime = 0 })
	for i := range 4 {
		put(t, b.DefaultCollection(), fmt.Sprint("k", i), 10)
		put(t, off.DefaultCollection(), fmt.Sprint("k", i), 10)
	}
	m := newManager(t, eng, nil)
	if s := settings(t, m, "off"); s.NextRun != 0 || s.ExpPagerStime != 0 {
		t.Fatalf("bucket created disabled: %+v", s)
	}
	s, err := m.SetSettings(ctx, "b", ptr(int64(0)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.NextRun != 0 || s.ExpPagerStime != 0 {
		t.Fatalf("after disabling: %+v", s)
	}
	if st, _ := m.Stats("b"); st.NextRun != 0 {
		t.Fatalf("Stats.NextRun = %d, want 0", st.NextRun)
	}
	for range 10 {
		clk.Advance(86400)
		tick(t, m)
	}
	wantStats(t, b, 0, 0, 4)
	wantStats(t, off, 0, 0, 4)

	r, err := m.RunNow(ctx, "off")
	if err != nil {
		t.Fatal(err)
	}
	if r.Purged != 4 {
		t.Fatalf("RunNow purged %d, want 4", r.Purged)
	}
	wantStats(t, off, 4, 1, 0)
	if s := settings(t, m, "off"); s.NextRun != 0 {
		t.Fatalf("RunNow scheduled a disabled pager: %+v", s)
	}

	now := clk.Now()
	if s, err = m.SetSettings(ctx, "b", ptr(int64(60)), nil); err != nil {
		t.Fatal(err)
	}
	if s.NextRun != now+60 {
		t.Fatalf("re-enabled: NextRun = now+%d, want now+60", s.NextRun-now)
	}
	clk.Advance(60)
	tick(t, m)
	wantStats(t, b, 4, 1, 0)
}

// TestInitialRunTime: with exp_pager_initial_run_time 7 and the clock at
// 05:30 UTC, the first run is at 07:00 UTC and the next stime after it.
func TestInitialRunTime(t *testing.T) {
	ctx := context.Background()
	at := func(day, h, m, s int) int64 { return time.Date(2024, 3, day, h, m, s, 0, time.UTC).Unix() }

	t.Run("bucket setting", func(t *testing.T) {
		eng, clk := newEngine(t, "")
		clk.Set(at(5, 5, 30, 0))
		b := newBucket(t, eng, "b", engine.Couchbase, func(s *engine.BucketSettings) { s.ExpPagerInitialRunTime = 7 })
		put(t, b.DefaultCollection(), "k", 60)
		m := newManager(t, eng, nil)
		if s := settings(t, m, "b"); s.NextRun != at(5, 7, 0, 0) {
			t.Fatalf("NextRun = %s, want 07:00", time.Unix(s.NextRun, 0).UTC())
		}
		clk.Set(at(5, 6, 59, 59))
		tick(t, m)
		wantStats(t, b, 0, 0, 1)
		clk.Set(at(5, 7, 0, 0))
		tick(t, m)
		wantStats(t, b, 1, 1, 0)
		if s := settings(t, m, "b"); s.NextRun != at(5, 8, 0, 0) {
			t.Fatalf("NextRun = %s, want 08:00", time.Unix(s.NextRun, 0).UTC())
		}
	})

	t.Run("SetSettings", func(t *testing.T) {
		eng, clk := newEngine(t, "")
		clk.Set(at(5, 5, 30, 0))
		newBucket(t, eng, "b", engine.Ephemeral, nil)
		m := newManager(t, eng, nil)
		if s := settings(t, m, "b"); s.NextRun != at(5, 6, 30, 0) {
			t.Fatalf("NextRun = %s, want 06:30 (stime after start)", time.Unix(s.NextRun, 0).UTC())
		}
		for _, c := range []struct {
			hour int
			want int64
		}{
			{7, at(5, 7, 0, 0)}, // later today
			{5, at(6, 5, 0, 0)}, // already past today: tomorrow
			{0, at(6, 0, 0, 0)}, // midnight
		} {
			s, err := m.SetSettings(ctx, "b", nil, ptr(c.hour))
			if err != nil {
				t.Fatal(err)
			}
			if s.NextRun != c.want || s.ExpPagerInitialRunTime != c.hour {
				t.Fatalf("hour %d: NextRun = %s, want %s", c.hour, time.Unix(s.NextRun, 0).UTC(), time.Unix(c.want, 0).UTC())
			}
		}
		// Back to -1: not pinned, stime from now is earlier than midnight.
		s, err := m.SetSettings(ctx, "b", nil, ptr(-1))
		if err != nil {
			t.Fatal(err)
		}
		if s.NextRun != at(5, 6, 30, 0) {
			t.Fatalf("hour -1: NextRun = %s, want 06:30", time.Unix(s.NextRun, 0).UTC())
		}
	})
}

// TestSetSettings_Invalid: values out of range are refused with
// ErrInvalidSetting naming the field, and nothing changes.
func TestSetSettings_Invalid(t *testing.T) {
	ctx := context.Background()
	eng, clk := newEngine(t, "")
	b := newBucket(t, eng, "b", engine.Couchbase, nil)
	m := newManager(t, eng, nil)
	clk.Advance(100)
	before, beforeBucket := settings(t, m, "b"), b.Settings()
	for _, c := range []struct {
		stime *int64
		hour  *int
		field string
	}{
		{ptr(int64(-1)), nil, "exp_pager_stime"},
		{ptr(int64(math.MinInt64)), nil, "exp_pager_stime"},
		{nil, ptr(24), "exp_pager_initial_run_time"},
		{nil, ptr(-2), "exp_pager_initial_run_time"},
		{ptr(int64(10)), ptr(99), "exp_pager_initial_run_time"}, // the valid half is not applied either
		{ptr(int64(-5)), ptr(3), "exp_pager_stime"},
	} {
		_, err := m.SetSettings(ctx, "b", c.stime, c.hour)
		if !errors.Is(err, pager.ErrInvalidSetting) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("SetSettings(%v, %v) = %v, want ErrInvalidSetting naming %s", c.stime, c.hour, err, c.field)
		}
	}
	if after := settings(t, m, "b"); !reflect.DeepEqual(after, before) {
		t.Fatalf("settings changed: %+v → %+v", before, after)
	}
	if after := b.Settings(); after != beforeBucket {
		t.Fatalf("bucket settings changed: %+v → %+v", beforeBucket, after)
	}
	if _, err := m.SetSettings(ctx, "nope", ptr(int64(5)), nil); !errors.Is(err, engine.ErrBucketNotFound) {
		t.Fatalf("unknown bucket: %v", err)
	}
}

// TestSetSettings_Persisted: the settings survive a restart, and a new
// Manager schedules from them.
func TestSetSettings_Persisted(t *testing.T) {
	dir := t.TempDir()
	func() {
		eng, _ := newEngine(t, dir)
		newBucket(t, eng, "b", engine.Couchbase, nil)
		m := pager.New(eng, nil)
		defer m.Close(context.Background())
		if _, err := m.SetSettings(context.Background(), "b", ptr(int64(10)), ptr(3)); err != nil {
			t.Fatal(err)
		}
		if err := eng.Close(); err != nil {
			t.Fatal(err)
		}
	}()
	eng, _ := newEngine(t, dir) // clock at t0 = 22:13:20 UTC
	b, err := eng.Bucket("b")
	if err != nil {
		t.Fatal(err)
	}
	if s := b.Settings(); s.ExpPagerStime != 10 || s.ExpPagerInitialRunTime != 3 {
		t.Fatalf("after reopen: %+v", s)
	}
	m := newManager(t, eng, nil)
	want := time.Date(2023, 11, 15, 3, 0, 0, 0, time.UTC).Unix()
	if s := settings(t, m, "b"); s.NextRun != want {
		t.Fatalf("NextRun = %s, want 03:00 next day", time.Unix(s.NextRun, 0).UTC())
	}
}

// TestRunNow runs the pager at once, counts the run, and schedules the next
// one stime later.
func TestRunNow(t *testing.T) {
	ctx := context.Background()
	eng, clk := newEngine(t, "")
	b := newBucket(t, eng, "b", engine.Couchbase, nil)
	c := b.DefaultCollection()
	for i := range 6 {
		put(t, c, fmt.Sprint("k", i), int64(10+i))
	}
	m := newManager(t, eng, nil)
	clk.Set(t0 + 13) // k0..k3 expired
	r, err := m.RunNow(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if r.Purged != 4 || r.Start != t0+13 || r.End != t0+13 || r.DurationMS < 0 {
		t.Fatalf("RunNow: %+v", r)
	}
	wantStats(t, b, 4, 1, 2)
	s := settings(t, m, "b")
	if s.NextRun != t0+13+3600 || s.LastRun == nil || *s.LastRun != r {
		t.Fatalf("settings: %+v last %+v", s, s.LastRun)
	}
	st, err := m.Stats("b")
	if err != nil {
		t.Fatal(err)
	}
	if st.NextRun != s.NextRun || st.LastRunDurationMS != r.DurationMS {
		t.Fatalf("stats %+v", st)
	}
	if _, err := m.RunNow(ctx, "nope"); !errors.Is(err, engine.ErrBucketNotFound) {
		t.Fatalf("unknown bucket: %v", err)
	}
}

// TestBucketsComeAndGo: a bucket created while the Manager runs is
// scheduled from when it is first seen; a deleted one is dropped, and one
// created again under the same name starts afresh.
func TestBucketsComeAndGo(t *testing.T) {
	ctx := context.Background()
	eng, clk := newEngine(t, "")
	m := newManager(t, eng, nil)
	tick(t, m)

	clk.Set(t0 + 50)
	b := newBucket(t, eng, "late", engine.Couchbase, nil)
	put(t, b.DefaultCollection(), "k", 10)
	tick(t, m)
	if s := settings(t, m, "late"); s.NextRun != t0+50+3600 {
		t.Fatalf("NextRun = t0+%d, want t0+3650", s.NextRun-t0)
	}
	clk.Set(t0 + 3650)
	tick(t, m)
	wantStats(t, b, 1, 1, 0)

	if err := eng.DeleteBucket(ctx, "late"); err != nil {
		t.Fatal(err)
	}
	tick(t, m)
	if _, err := m.Settings("late"); !errors.Is(err, engine.ErrBucketNotFound) {
		t.Fatalf("deleted bucket: %v", err)
	}
	clk.Set(t0 + 4000)
	newBucket(t, eng, "late", engine.Ephemeral, nil)
	if s := settings(t, m, "late"); s.NextRun != t0+4000+3600 || s.LastRun != nil {
		t.Fatalf("recreated: %+v", s)
	}
}

// TestClose: Close stops the loop without leaking it, may be repeated, and
// the Manager refuses work afterwards.
func TestClose(t *testing.T) {
	ctx := context.Background()
	eng, _ := newEngine(t, "")
	newBucket(t, eng, "b", engine.Ephemeral, nil)
	before := runtime.NumGoroutine()
	m := pager.New(eng, &pager.Options{PollInterval: time.Millisecond})
	m.Start()
	m.Start() // no second loop
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	checkNoPagerGoroutines(t)
	waited := time.After(time.Minute) // a leak, not a busy machine, gets there
	for runtime.NumGoroutine() > before {
		select {
		case <-waited:
			t.Fatalf("%d goroutines after Close, %d before Start", runtime.NumGoroutine(), before)
		case <-time.After(5 * time.Millisecond):
		}
	}
	m.Start() // closed: does nothing
	checkNoPagerGoroutines(t)
	if err := m.Tick(ctx); !errors.Is(err, pager.ErrClosed) {
		t.Fatalf("Tick after Close: %v", err)
	}
	if _, err := m.RunNow(ctx, "b"); !errors.Is(err, pager.ErrClosed) {
		t.Fatalf("RunNow after Close: %v", err)
	}
	if _, err := m.SetSettings(ctx, "b", ptr(int64(1)), nil); !errors.Is(err, pager.ErrClosed) {
		t.Fatalf("SetSettings after Close: %v", err)
	}
	if _, err := m.Settings("b"); !errors.Is(err, pager.ErrClosed) {
		t.Fatalf("Settings after Close: %v", err)
	}
	// Never started: Close is immediate.
	if err := pager.New(eng, nil).Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestClose_Timeout: Close gives up when its ctx ends while a callback holds
// the loop, and a later Close waits for the loop to finish.
func TestClose_Timeout(t *testing.T) {
	eng, clk := newEngine(t, "")
	newBucket(t, eng, "b", engine.Ephemeral, func(s *engine.BucketSettings) { s.ExpPagerStime = 1 })
	started, release := make(chan struct{}), make(chan struct{})
	m := newManager(t, eng, &pager.Options{
		PollInterval: time.Millisecond,
		Events:       &pager.Events{RunBegin: func(string) { close(started); <-release }},
	})
	m.Start()
	clk.Advance(1)
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := m.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close = %v, want DeadlineExceeded", err)
	}
	close(release)
	if err := m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkNoPagerGoroutines(t)
}

// TestRunNow_Cancelled: a cancelled run returns the context's error and is
// not counted.
func TestRunNow_Cancelled(t *testing.T) {
	eng, clk := newEngine(t, "")
	b := newBucket(t, eng, "b", engine.Couchbase, nil)
	put(t, b.DefaultCollection(), "k", 1)
	m := newManager(t, eng, nil)
	clk.Advance(5)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.RunNow(ctx, "b"); !errors.Is(err, context.Canceled) {
		t.Fatalf("RunNow = %v, want Canceled", err)
	}
	wantStats(t, b, 0, 0, 1)
}

// TestBackgroundLoop: with Start, the loop's ticker polls and the engine
// clock decides: moving the clock to the due time makes the run happen
// without any call to Tick.
func TestBackgroundLoop(t *testing.T) {
	ctx := context.Background()
	eng, clk := newEngine(t, "")
	b := newBucket(t, eng, "b", engine.Couchbase, nil)
	for i := range 3 {
		put(t, b.DefaultCollection(), fmt.Sprint("k", i), 5)
	}
	ends := make(chan pager.RunResult, 10)
	m := newManager(t, eng, &pager.Options{
		PollInterval: 2 * time.Millisecond,
		Events:       &pager.Events{RunEnd: func(_ string, r pager.RunResult) { ends <- r }},
	})
	m.Start()
	if _, err := m.SetSettings(ctx, "b", ptr(int64(10)), nil); err != nil {
		t.Fatal(err)
	}
	clk.Set(t0 + 10)
	select {
	case r := <-ends:
		if r.Purged != 3 || r.Start != t0+10 {
			t.Fatalf("run: %+v", r)
		}
	case <-time.After(time.Minute): // the loop polls every 2ms: only a loop that never runs gets here
		t.Fatal("no run within a minute of real time")
	}
	wantStats(t, b, 3, 1, 0)
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	checkNoPagerGoroutines(t)
}

// TestConcurrentUse exercises the loop, RunNow, SetSettings, Settings, writes
// and clock moves together, for the race detector.
func TestConcurrentUse(t *testing.T) {
	ctx := context.Background()
	eng, clk := newEngine(t, "")
	buckets := []*engine.Bucket{
		newBucket(t, eng, "a", engine.Couchbase, func(s *engine.BucketSettings) { s.ExpPagerStime = 5 }),
		newBucket(t, eng, "e", engine.Ephemeral, func(s *engine.BucketSettings) { s.ExpPagerStime = 7 }),
	}
	// Runs by bucket: "e" runs on RunNow, "a" only when its schedule says.
	runs := map[string]*atomic.Int64{"a": {}, "e": {}}
	var mu sync.Mutex
	var failures []error
	m := newManager(t, eng, &pager.Options{
		PollInterval: time.Millisecond,
		BatchSize:    7,
		Events: &pager.Events{
			RunEnd: func(b string, _ pager.RunResult) { runs[b].Add(1) },
			Error: func(bucket string, err error) {
				mu.Lock()
				failures = append(failures, fmt.Errorf("%s: %w", bucket, err))
				mu.Unlock()
			},
		},
	})
	m.Start()
	var wg sync.WaitGroup
	for w, b := range buckets {
		wg.Go(func() {
			c := b.DefaultCollection()
			for i := range 500 {
				key := fmt.Sprint("k", w, "-", i%50)
				if _, err := c.Upsert(ctx, key, []byte(`{}`), &engine.WriteOptions{Expiry: int64(1 + i%5)}); err != nil {
					t.Error(err)
					return
				}
				if i%10 == 0 {
					clk.Advance(1)
				}
			}
		})
	}
	wg.Go(func() {
		for i := range 50 {
			if _, err := m.SetSettings(ctx, "a", ptr(int64(1+i%4)), ptr(-1+i%3)); err != nil {
				t.Error(err)
			}
			if _, err := m.RunNow(ctx, "e"); err != nil {
				t.Error(err)
			}
			if _, err := m.Settings("a"); err != nil {
				t.Error(err)
			}
			if err := m.Tick(ctx); err != nil {
				t.Error(err)
			}
		}
	})
	wg.Wait()
	if n := runs["e"].Load(); n < 50 {
		t.Errorf("%d runs of e, want at least its 50 RunNow", n)
	}
	// The loop runs a's schedule once it is due. (The settings above may
	// have left a's first run at an hour of the day, far off.) The
	// deadline only catches a loop that never does.
	if _, err := m.SetSettings(ctx, "a", ptr(int64(1)), ptr(-1)); err != nil {
		t.Fatal(err)
	}
	runs["a"].Store(0)
	clk.Advance(2)
	for deadline := time.Now().Add(time.Minute); runs["a"].Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no scheduled run of a in a minute")
		}
	}
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if len(failures) > 0 {
		t.Fatal(failures)
	}
	clk.Advance(100)
	for _, b := range buckets {
		// Everything has expired; a final manual run leaves nothing behind.
		m2 := newManager(t, eng, nil)
		if _, err := m2.RunNow(ctx, b.Name()); err != nil {
			t.Fatal(err)
		}
		if st := b.Stats(); st.CurrItems != 0 || st.WithExpiry != 0 {
			t.Fatalf("%s: %+v", b.Name(), st)
		}
	}
}

// TestTeeEvents: both sides see every event; nil callbacks are skipped.
func TestTeeEvents(t *testing.T) {
	var got []string
	a := pager.Events{RunBegin: func(b string) { got = append(got, "a begin "+b) }}
	b := pager.Events{
		RunBegin: func(b string) { got = append(got, "b begin "+b) },
		RunEnd:   func(b string, r pager.RunResult) { got = append(got, fmt.Sprint("b end ", b, r.Purged)) },
	}
	ev := pager.TeeEvents(a, b)
	ev.RunBegin("x")
	ev.RunEnd("x", pager.RunResult{Purged: 2})
	ev.MetadataPurged("x", 1)
	ev.Error("x", errors.New("boom"))
	want := []string{"a begin x", "b begin x", "b end x2"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// TestOptions: defaults, and Validate refusing negatives.
func TestOptions(t *testing.T) {
	o := pager.DefaultOptions()
	if o.BatchSize != 1000 || o.PollInterval != 250*time.Millisecond || o.MetadataPurgePeriod != 3600 || o.Logger == nil || o.Events == nil || o.Events.RunEnd == nil {
		t.Fatalf("defaults: %+v", o)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := (&pager.Options{BatchSize: -1}).Validate(); !errors.Is(err, pager.ErrInvalidSetting) {
		t.Fatalf("BatchSize -1: %v", err)
	}
}

// TestSettings_BucketEditWakesLoop: the bucket tells the pager of a bucket
// edit at once, so a run the edit makes due starts without waiting for the
// next poll (here an hour away).
func TestSettings_BucketEditWakesLoop(t *testing.T) {
	eng, clk := newEngine(t, "")
	b := newBucket(t, eng, "b", engine.Couchbase, nil)
	put(t, b.DefaultCollection(), "k", 5)
	clk.Set(t0 - t0%3600 + 3600) // the next hour, exactly
	hour := int(clk.Now() % 86400 / 3600)
	ran := make(chan pager.RunResult, 1)
	purged := make(chan struct{}, 1)
	m := newManager(t, eng, &pager.Options{PollInterval: time.Hour, Events: &pager.Events{
		RunEnd: func(_ string, r pager.RunResult) {
			select {
			case ran <- r:
			default:
			}
		},
		MetadataPurged: func(string, int) {
			select {
			case purged <- struct{}{}:
			default:
			}
		},
	}})
	m.Start()
	// The loop's first tick does a metadata purge pass (nothing else is
	// due); after it, the next poll is an hour away.
	select {
	case <-purged:
	case <-time.After(time.Minute): // only a hang gets here
		t.Fatal("the loop's first tick did not come")
	}
	if _, _, err := b.UpdateSettings(context.Background(), func(s *engine.BucketSettings) error {
		s.ExpPagerInitialRunTime = hour
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-ran:
		if r.Purged != 1 {
			t.Fatalf("run after the edit purged %d, want 1", r.Purged)
		}
	case <-time.After(time.Minute): // only a hang gets here
		t.Fatal("no pager run after a bucket edit made one due")
	}
}
