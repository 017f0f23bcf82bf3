package pager

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/mayflydb/mayfly/engine"
)

// RunResult describes one expiry pager run.
type RunResult struct {
	// Start is when the run began, by the engine clock (Unix seconds).
	Start int64 `json:"start"`
	// End is when the run ended, by the engine clock (Unix seconds).
	End int64 `json:"end"`
	// DurationMS is how long the run took in real time (milliseconds); it is
	// ep_pager_last_run_duration_ms.
	DurationMS int64 `json:"duration_ms"`
	// Purged counts the expired documents the run purged.
	Purged int `json:"purged"`
	// Batches counts the Bucket.ExpireBatch calls the run made.
	Batches int `json:"batches"`
}

// Settings are a bucket's pager settings and schedule.
type Settings struct {
	// ExpPagerStime is the seconds between runs; 0 means disabled.
	ExpPagerStime int64 `json:"exp_pager_stime"`
	// ExpPagerInitialRunTime is the UTC hour (0..23) of the first run, or -1
	// for none.
	ExpPagerInitialRunTime int `json:"exp_pager_initial_run_time"`
	// NextRun is when the next run is due (engine clock, Unix seconds), 0 if
	// the pager is disabled.
	NextRun int64 `json:"next_run"`
	// LastRun is the last run, scheduled or manual, or nil if there was none
	// since the Manager started.
	LastRun *RunResult `json:"last_run"`
}

// Stats are the pager's own statistics for a bucket. The other expiry
// statistics (ep_expired_pager, ep_num_expiry_pager_runs, ep_meta_data_purged,
// curr_items…) come from engine.Bucket.Stats.
type Stats struct {
	// LastRunDurationMS is the last run's real duration in milliseconds
	// (ep_pager_last_run_duration_ms), 0 before the first run.
	LastRunDurationMS int64
	// NextRun is when the next run is due (engine clock, Unix seconds), 0 if
	// the pager is disabled (ep_expiry_pager_task_time, NOT_SCHEDULED).
	NextRun int64
}

// Manager runs the expiry pager and the metadata purger of every bucket of an
// engine. It looks the buckets up on every tick, so buckets created or deleted
// while it runs are picked up or dropped. It is safe for concurrent use.
type Manager struct {
	eng  *engine.Engine
	opts Options
	ev   Events
	log  *slog.Logger

	life   context.Context // ends when Close is called
	cancel context.CancelFunc
	wake   chan struct{} // a settings change asks the loop to tick now

	mu struct {
		sync.Mutex
		buckets map[string]*bucketPager // by bucket name
		done    chan struct{}           // closed when the loop exits; nil until Start
		closed  bool
	}
}

// bucketPager is the pager state of one bucket.
type bucketPager struct {
	b    *engine.Bucket
	name string
	// life ends when the bucket is detached (closed or deleted); runs on it
	// are cancelled then.
	life context.Context
	stop context.CancelFunc
	// busy holds a token while a run or a metadata purge works on the bucket:
	// one at a time, and taking it honours a context.
	busy chan struct{}
	// unwatch ends the watch of the bucket's settings.
	unwatch func()

	// The schedule's settings (exp_pager_stime, exp_pager_initial_run_time)
	// are the bucket's own: the bucket tells bp of every change
	// (settingsChanged), and bp keeps only the times computed from them.
	mu struct {
		sync.Mutex
		next      int64      // next run, 0 = disabled
		last      *RunResult // never modified once stored
		nextPurge int64      // next metadata purge pass
	}
}

// New returns a Manager over eng's buckets; a nil opts means
// DefaultOptions(). Every bucket that exists now gets its first run scheduled
// from now by the engine clock. Nothing runs in the background until Start;
// Tick, RunNow and PurgeMetadata work without it.
func New(eng *engine.Engine, opts *Options) *Manager {
	o := Options{}
	if opts != nil {
		o = *opts
	}
	o.EnsureDefaults()
	m := &Manager{eng: eng, opts: o, ev: *o.Events, log: o.Logger, wake: make(chan struct{}, 1)}
	m.life, m.cancel = context.WithCancel(context.Background())
	m.mu.buckets = make(map[string]*bucketPager)
	if err := eng.Attach(context.Background(), m); err != nil {
		m.log.Warn("the expiry pager could not follow bucket creation and deletion", "err", err)
	}
	m.sync()
	return m
}

// AttachBucket starts paging a bucket that was opened or created: its first
// run is scheduled from now. It implements engine.BucketService.
func (m *Manager) AttachBucket(ctx context.Context, b *engine.Bucket) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stateLocked(b)
	return nil
}

// DetachBucket stops paging a bucket that is closing or being deleted: a run
// or metadata purge in progress on it is cancelled and waited for (or ctx
// ends first). It implements engine.BucketService.
func (m *Manager) DetachBucket(ctx context.Context, b *engine.Bucket, deleted bool) error {
	m.mu.Lock()
	bp := m.mu.buckets[b.Name()]
	if bp != nil && bp.b == b {
		delete(m.mu.buckets, b.Name())
	} else {
		bp = nil
	}
	m.mu.Unlock()
	if bp == nil {
		return nil
	}
	bp.close()
	if err := bp.acquire(ctx); err != nil {
		return fmt.Errorf("pager: waiting for a run on bucket %s: %w", b.Name(), err)
	}
	bp.release()
	return nil
}

// Start starts the background loop, which calls Tick every
// Options.PollInterval and at once after a settings change. It does nothing
// if the loop is running or the Manager is closed.
func (m *Manager) Start() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed || m.mu.done != nil {
		return
	}
	done := make(chan struct{})
	m.mu.done = done
	go m.loop(done)
}

// loop is the background goroutine; it exits when Close cancels m.life.
func (m *Manager) loop(done chan struct{}) {
	defer close(done)
	t := time.NewTicker(m.opts.PollInterval)
	defer t.Stop()
	for {
		// Failures are logged and reported through Events by tickBucket.
		_ = m.Tick(m.life)
		select {
		case <-m.life.Done():
			return
		case <-t.C:
		case <-m.wake:
		}
	}
}

// Close stops the background loop, cancelling the runs in progress (those of
// Tick, RunNow and PurgeMetadata too), and waits for the loop to exit or for
// ctx to end. Afterwards the Manager's methods return ErrClosed. Close may be
// called again, for instance after its ctx ended, to wait again.
func (m *Manager) Close(ctx context.Context) error {
	m.mu.Lock()
	m.mu.closed = true
	done := m.mu.done
	m.mu.Unlock()
	m.cancel()
	if done == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("pager: close: %w", ctx.Err())
	}
}

func (m *Manager) isClosed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.closed
}

// withLife returns ctx, also cancelled when the Manager is closed.
func (m *Manager) withLife(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(m.life, cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}

// poke asks the background loop, if any, to tick now.
func (m *Manager) poke() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// sync brings the bucket states in line with the engine's buckets and
// returns them, sorted by name.
func (m *Manager) sync() []*bucketPager {
	bs := m.eng.Buckets()
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := make(map[string]bool, len(bs))
	out := make([]*bucketPager, 0, len(bs))
	for _, b := range bs {
		seen[b.Name()] = true
		out = append(out, m.stateLocked(b))
	}
	for name, bp := range m.mu.buckets {
		if !seen[name] {
			bp.close()
			delete(m.mu.buckets, name)
		}
	}
	return out
}

// stateLocked returns b's state, creating it if b is new (a bucket deleted
// and created again under the same name is new).
//
// REQUIRES: m.mu held.
func (m *Manager) stateLocked(b *engine.Bucket) *bucketPager {
	bp := m.mu.buckets[b.Name()]
	if bp == nil || bp.b != b {
		if bp != nil {
			bp.close()
		}
		bp = m.newBucketPager(b)
		m.mu.buckets[b.Name()] = bp
	}
	return bp
}

// bucket returns the named bucket's state, or an error wrapping
// engine.ErrBucketNotFound or ErrClosed.
func (m *Manager) bucket(name string) (*bucketPager, error) {
	if m.isClosed() {
		return nil, ErrClosed
	}
	b, err := m.eng.Bucket(name)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stateLocked(b), nil
}

// gone reports whether bp's bucket was deleted (or replaced).
func (m *Manager) gone(bp *bucketPager) bool {
	b, err := m.eng.Bucket(bp.name)
	return err != nil || b != bp.b
}

// newBucketPager starts the pager state of b: its first run scheduled from
// now, and a watch of its settings that reschedules on every change.
func (m *Manager) newBucketPager(b *engine.Bucket) *bucketPager {
	bp := &bucketPager{b: b, name: b.Name(), busy: make(chan struct{}, 1)}
	bp.life, bp.stop = context.WithCancel(context.Background())
	// Watch before reading the settings, so that no change falls between the
	// two: one told before the read is in what the read sees.
	bp.unwatch = b.WatchSettings(func(old, updated engine.BucketSettings) { m.settingsChanged(bp, old, updated) })
	now := b.Clock().Now()
	bp.mu.Lock()
	bp.mu.next = firstRun(now, scheduleOf(b.Settings()))
	bp.mu.nextPurge = now
	bp.mu.Unlock()
	return bp
}

// close ends bp: runs on it are cancelled and its settings are no longer
// watched.
func (bp *bucketPager) close() {
	bp.stop()
	bp.unwatch()
}

// scheduleOf returns the pager schedule settings s holds.
func scheduleOf(s engine.BucketSettings) schedule {
	return schedule{stime: s.ExpPagerStime, hour: s.ExpPagerInitialRunTime}
}

// settingsChanged reschedules bp's next run after its bucket's settings
// changed from old to updated (through SetSettings or a bucket edit), and
// asks the background loop to tick at once.
func (m *Manager) settingsChanged(bp *bucketPager, old, updated engine.BucketSettings) {
	from, to := scheduleOf(old), scheduleOf(updated)
	if from == to {
		return
	}
	bp.mu.Lock()
	bp.mu.next = rescheduled(bp.b.Clock().Now(), bp.mu.next, from, to)
	next := bp.mu.next
	bp.mu.Unlock()
	m.log.Info("expiry pager settings changed", "bucket", bp.name,
		"exp_pager_stime", to.stime, "exp_pager_initial_run_time", to.hour, "next_run", next)
	m.poke()
}

// bind returns ctx, also cancelled when bp's bucket is detached.
func (bp *bucketPager) bind(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(bp.life, cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}

// acquire takes bp's work token, waiting for a run in progress.
func (bp *bucketPager) acquire(ctx context.Context) error {
	select {
	case bp.busy <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// release gives back the token acquire took.
func (bp *bucketPager) release() { <-bp.busy }

// settingsLocked returns the state as Settings.
//
// REQUIRES: bp.mu held.
func (bp *bucketPager) settingsLocked() Settings {
	sc := scheduleOf(bp.b.Settings())
	s := Settings{ExpPagerStime: sc.stime, ExpPagerInitialRunTime: sc.hour, NextRun: bp.mu.next}
	if bp.mu.last != nil {
		r := *bp.mu.last
		s.LastRun = &r
	}
	return s
}

// due reports whether a run and a metadata purge are due at now, and when the
// run was due.
func (bp *bucketPager) due(now int64) (runDue bool, at int64, purgeDue bool) {
	bp.mu.Lock()
	defer bp.mu.Unlock()
	return bp.mu.next != 0 && bp.mu.next <= now, bp.mu.next, bp.mu.nextPurge <= now
}

// Tick does whatever is due at the engine clock's now, bucket by bucket: a
// pager run where the next run is due, and a metadata purge pass where one
// is due. A bucket still warming up is passed over (its run and purge wait
// for every document, and one bucket's warm-up must not hold the others'
// pagers): what is due on it stays due, and the first Tick after its
// warm-up does it. The background loop calls it; tests call it after moving
// a fake clock. It returns the failures joined, each naming its bucket (they
// are also logged and reported to Events.Error).
func (m *Manager) Tick(ctx context.Context) error {
	if m.isClosed() {
		return ErrClosed
	}
	ctx, done := m.withLife(ctx)
	defer done()
	var errs []error
	for _, bp := range m.sync() {
		if err := m.tickBucket(ctx, bp); err != nil {
			errs = append(errs, fmt.Errorf("pager: bucket %s: %w", bp.name, err))
		}
	}
	return errors.Join(errs...)
}

// tickBucket does what is due for one bucket.
func (m *Manager) tickBucket(ctx context.Context, bp *bucketPager) error {
	runDue, _, purgeDue := bp.due(bp.b.Clock().Now())
	if !runDue && !purgeDue {
		return nil
	}
	if warming(bp.b) {
		return nil // still due when the warm-up ends
	}
	if err := bp.acquire(ctx); err != nil {
		return err
	}
	defer bp.release()
	ctx, unbind := bp.bind(ctx)
	defer unbind()
	// Check again with the token: a concurrent Tick or RunNow may have done
	// the work while this one waited.
	now := bp.b.Clock().Now()
	runDue, at, purgeDue := bp.due(now)
	var errs []error
	if runDue {
		res, err := m.run(ctx, bp)
		bp.mu.Lock()
		bp.mu.last = &res
		if bp.mu.next == at { // not rescheduled during the run
			bp.mu.next = afterRun(at, res.Start, bp.b.Settings().ExpPagerStime)
		}
		bp.mu.Unlock()
		if err != nil {
			errs = append(errs, m.report(bp, "expiry pager run", err))
		}
	}
	if purgeDue {
		_, err := m.purge(ctx, bp)
		bp.mu.Lock()
		bp.mu.nextPurge = addSat(now, m.opts.MetadataPurgePeriod)
		bp.mu.Unlock()
		if err != nil {
			errs = append(errs, m.report(bp, "metadata purge", err))
		}
	}
	return errors.Join(errs...)
}

// warming reports whether b's warm-up still runs. A warm-up that ended
// without loading (the bucket closed) is not warming: the run reports that.
func warming(b *engine.Bucket) bool {
	return !b.Warm() && b.WarmupStats().Running
}

// report logs a background failure and passes it to Events.Error, and returns
// it, unless it only says the bucket went away meanwhile.
func (m *Manager) report(bp *bucketPager, what string, err error) error {
	if errors.Is(err, engine.ErrClosed) && m.gone(bp) {
		m.log.Debug(what+" stopped: bucket deleted", "bucket", bp.name)
		return nil
	}
	if m.life.Err() != nil && errors.Is(err, context.Canceled) {
		return nil // Close cancelled it
	}
	m.log.Warn(what+" failed", "bucket", bp.name, "err", err)
	m.ev.Error(bp.name, err)
	return err
}

// slowRunMS is the duration (milliseconds) from which a pager run that purged
// nothing is logged at info level: an idle bucket's run reads the head of its
// expiry index and takes a few milliseconds.
const slowRunMS = 1000

// run purges everything expired in bp's bucket, batch by batch.
//
// REQUIRES: bp's token held.
func (m *Manager) run(ctx context.Context, bp *bucketPager) (RunResult, error) {
	clk := bp.b.Clock()
	res := RunResult{Start: clk.Now()}
	m.ev.RunBegin(bp.name)
	began := time.Now() // wall clock: duration only
	var err error
	for {
		n, more, e := bp.b.ExpireBatch(ctx, m.opts.BatchSize)
		res.Batches++
		res.Purged += n
		if e != nil {
			err = e
			break
		}
		// A batch that purged nothing though more is due found only
		// documents changed meanwhile; the next run sees what is left.
		if !more || n == 0 {
			break
		}
		// Each expiration writes its tombstone, about a disk page apiece
		// for scattered keys: waiting for each batch's purges (which
		// group commit gathers, as ExpireBatch does not wait) keeps a
		// run's commits near BatchSize, so client writes queued meanwhile
		// never wait behind one commit of the whole run.
		if e := bp.b.Sync(ctx); e != nil {
			err = e
			break
		}
	}
	if err == nil {
		// The run ends when its purges are on disk.
		err = bp.b.Sync(ctx)
	}
	if err == nil {
		bp.b.CountPagerRun()
	}
	res.End = clk.Now()
	res.DurationMS = time.Since(began).Milliseconds() // wall clock: duration only
	// A run that purged something or took long is news; the runs of an idle
	// bucket (every exp_pager_stime) stay at debug level.
	level := slog.LevelDebug
	if res.Purged > 0 || res.DurationMS >= slowRunMS {
		level = slog.LevelInfo
	}
	m.log.Log(ctx, level, "expiry pager run", "bucket", bp.name, "purged", res.Purged, "batches", res.Batches, "duration_ms", res.DurationMS)
	m.ev.RunEnd(bp.name, res)
	return res, err
}

// RunNow runs the named bucket's pager now, whether or not it is enabled
// (POST .../controller/runExpiryPager), waiting for a run in progress to end
// first. The run counts in ep_num_expiry_pager_runs, and the next scheduled
// run, if the pager is enabled, is exp_pager_stime after this one's start.
func (m *Manager) RunNow(ctx context.Context, bucket string) (RunResult, error) {
	bp, err := m.bucket(bucket)
	if err != nil {
		return RunResult{}, err
	}
	ctx, done := m.withLife(ctx)
	defer done()
	if err := bp.acquire(ctx); err != nil {
		return RunResult{}, err
	}
	defer bp.release()
	ctx, unbind := bp.bind(ctx)
	defer unbind()
	res, err := m.run(ctx, bp)
	bp.mu.Lock()
	bp.mu.last = &res
	if stime := bp.b.Settings().ExpPagerStime; stime > 0 {
		bp.mu.next = addSat(res.Start, stime)
	}
	bp.mu.Unlock()
	return res, err
}

// Settings returns the named bucket's pager settings and schedule.
func (m *Manager) Settings(bucket string) (Settings, error) {
	bp, err := m.bucket(bucket)
	if err != nil {
		return Settings{}, err
	}
	bp.mu.Lock()
	defer bp.mu.Unlock()
	return bp.settingsLocked(), nil
}

// Stats returns the named bucket's pager statistics.
func (m *Manager) Stats(bucket string) (Stats, error) {
	s, err := m.Settings(bucket)
	if err != nil {
		return Stats{}, err
	}
	st := Stats{NextRun: s.NextRun}
	if s.LastRun != nil {
		st.LastRunDurationMS = s.LastRun.DurationMS
	}
	return st, nil
}

// SetSettings changes the named bucket's exp_pager_stime (seconds, ≥ 0; 0
// disables the pager) and/or exp_pager_initial_run_time (UTC hour -1..23);
// a nil pointer leaves that setting alone. The change is persisted with the
// bucket and reschedules the next run at once:
//   - stime 0: disabled, NextRun 0;
//   - enabling a disabled pager: the first run as for a new bucket (at the
//     initial-run hour if set, else now+stime);
//   - a new initial-run hour (0..23): the next run at its next occurrence;
//   - otherwise the next run only moves earlier: min(NextRun, now+stime).
//     Lowering 3600 to 10 makes it due 10 s from now.
//
// A value out of range returns an error wrapping ErrInvalidSetting, naming
// the setting, and changes nothing. It returns the settings after the change.
func (m *Manager) SetSettings(ctx context.Context, bucket string, stime *int64, initialRunTime *int) (Settings, error) {
	_, s, err := m.UpdateSettings(ctx, bucket, stime, initialRunTime)
	return s, err
}

// UpdateSettings is SetSettings, also returning the settings before the
// change, taken atomically with it (for an audit record).
func (m *Manager) UpdateSettings(ctx context.Context, bucket string, stime *int64, initialRunTime *int) (old, updated Settings, err error) {
	if stime != nil && *stime < 0 {
		return old, old, fmt.Errorf("%w: exp_pager_stime: must be 0 (disabled) or a whole number of seconds, got %d", ErrInvalidSetting, *stime)
	}
	if initialRunTime != nil && (*initialRunTime < -1 || *initialRunTime > 23) {
		return old, old, fmt.Errorf("%w: exp_pager_initial_run_time: must be an hour (UTC) from 0 to 23, or -1 for none, got %d", ErrInvalidSetting, *initialRunTime)
	}
	bp, err := m.bucket(bucket)
	if err != nil {
		return old, old, err
	}
	// The bucket tells bp of the change (settingsChanged), which reschedules
	// before UpdateSettings returns. fn runs under the bucket's definition
	// lock, so old is read atomically with the change.
	_, _, err = bp.b.UpdateSettings(ctx, func(s *engine.BucketSettings) error {
		bp.mu.Lock()
		old = bp.settingsLocked()
		bp.mu.Unlock()
		if stime != nil {
			s.ExpPagerStime = *stime
		}
		if initialRunTime != nil {
			s.ExpPagerInitialRunTime = *initialRunTime
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, engine.ErrInvalidSetting) {
			err = fmt.Errorf("%w: %w", ErrInvalidSetting, err)
		}
		return old, old, err
	}
	bp.mu.Lock()
	updated = bp.settingsLocked()
	bp.mu.Unlock()
	return old, updated, nil
}
