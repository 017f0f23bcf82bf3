package feed

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mayflydb/mayfly/engine"
)

// ErrStopped is returned by CatchUp and Lock once the consumer is stopped,
// unless Options.Stopped says otherwise.
var ErrStopped = errors.New("feed: consumer stopped")

// DefaultRetryDelay is the default Options.RetryDelay.
const DefaultRetryDelay = time.Second

// BigBuild is the backlog, in changes, from which a catch-up is logged (at
// info level) as a build when it starts and when it ends.
const BigBuild = 1000

// Sink is what a consumer keeps of the feed: an index. The Consumer calls
// Prepare from one goroutine while it calls Apply from another, and never
// two Prepares or two Applies at once. Its follower may call the sink before
// Start has returned: a sink's methods must not use the Consumer Start
// returns.
type Sink[B any] interface {
	// Position returns the bucket history (UUID) and the feed position (a
	// sequence number per partition) the sink holds. It may be called at
	// any time, concurrently with the sink's other methods (a catch-up
	// whose target the sink holds returns without the right to change
	// it, see Consumer.CatchUp): seqs must then be no older than uuid,
	// that is, read after the Follow that recorded uuid (a Rewind's zeros
	// come with the Follow after it), and every change they count must
	// be in what the sink answers.
	Position() (uuid uint64, seqs []uint64)
	// Reset discards everything the sink holds: its position is then the
	// start of the feed. Start calls it when the bucket no longer holds the
	// sink's position.
	Reset(ctx context.Context) error
	// Follow records that the sink's position belongs to the bucket history
	// uuid. Start calls it after checking (or resetting) the position, and
	// a catch-up after a Rewind, or when the history changed and the
	// sink's position is still held.
	Follow(uuid uint64) error
	// Rewind forgets everything the sink holds of the documents of the
	// partitions parts (their rows, their index entries) and sets its
	// position in each of them to 0, keeping the other partitions' as they
	// are, while the sink answers queries. A catch-up calls it, with the
	// right to change the sink held, when the bucket's history changed and
	// no longer holds the sink's position in those partitions (the node's
	// copy of a partition was dropped: engine.Bucket.RollbackPartitions);
	// Follow comes next. A crash during it must leave the sink either as
	// before (its position, of the old history, is then rolled back again
	// at Start) or with the partitions at 0. durable is called, as Apply
	// calls it, once the position with the partitions at 0 is durable.
	Rewind(ctx context.Context, parts []int, durable func()) error
	// Prepare turns the next changes into a batch, reading changes as far as
	// it wants (the batch then ends at the last change it read), and returns
	// the number of documents the batch changes in the sink. It may report
	// changes it has prepared to p as it goes, so that progress moves within
	// a batch.
	Prepare(ctx context.Context, changes iter.Seq[*engine.Document], p *Progress) (batch B, docs int, err error)
	// Apply writes batch and the feed position next it reaches, in one step
	// (what a crash leaves is the sink before or after the batch), and calls
	// durable once that position is durable: before it returns, or later
	// from any goroutine (a sink writing to disk in the background), or
	// never if it never is.
	Apply(ctx context.Context, batch B, next []uint64, durable func()) error
}

// BeforeCatchUp is implemented by a sink that has work to do before each
// catch-up, with the right to change it held (see Consumer.Lock). ack
// acknowledges a durable position it reaches meanwhile (Consumer.Ack).
type BeforeCatchUp interface {
	BeforeCatchUp(ctx context.Context, ack func([]uint64) error) error
	// BeforeCatchUpDue reports whether BeforeCatchUp has work to do. It
	// is called without the right to change the sink, concurrently with
	// any of its methods, and must report false only once what
	// BeforeCatchUp would do shows in Position: a catch-up whose target
	// the sink holds returns without BeforeCatchUp (and without waiting
	// for the right to change the sink) only when it reports false.
	BeforeCatchUpDue() bool
}

// Quieter is implemented by a sink that holds work back while changes keep
// coming (a paged view index writes its pages, and so makes its position
// durable, lazily) and finishes it when its feed goes quiet: the follower
// calls Quiet, with the right to change the sink held, once no change has
// come for Options.QuietDelay after a catch-up. Without it, a sink fed
// rarely would keep its position unacknowledged, and the bucket's metadata
// purge waiting, until its next threshold.
type Quieter interface {
	Quiet(ctx context.Context) error
}

// DefaultQuietDelay is the default Options.QuietDelay.
const DefaultQuietDelay = time.Second

// Options configure a Consumer.
type Options struct {
	// Kind names the consumer's kind in log messages: "views", "search".
	Kind string
	// LogKey and LogID identify the consumer in log lines (LogKey=LogID:
	// "ddoc"="_design/a").
	LogKey, LogID string
	// BatchSize is how many changes a batch holds at most (0: no limit),
	// while the process's memory is well under Go's memory limit
	// (debug.SetMemoryLimit). A batch read when it is within an eighth of
	// the limit holds a quarter of BatchSize (at least one change): a
	// catch-up holds two batches at a time, and smaller ones keep a
	// build's heap from passing the limit while the collector falls
	// behind. The memory is looked at before each batch is read.
	BatchSize int
	// BatchBytes bounds a batch by the bytes of its changes too (keys and
	// values, as the bucket holds them): a batch ends with the change that
	// takes it to BatchBytes, so it holds at least one change and passes
	// BatchBytes by less than its last change's size (0: no bound). A
	// sink whose work grows with a document's size (search: bleve's
	// analysis holds many times a document's bytes until the batch is
	// written) bounds its memory by bytes rather than by documents alone.
	BatchBytes int64
	// Auto follows the feed as it moves. Without it, the consumer catches up
	// only when asked (CatchUp, Kick).
	Auto bool
	// Fresh says that the sink starts empty (created, or rebuilt): its first
	// build is logged when it ends, whatever its size.
	Fresh bool
	// StartedMsg and EndedMsg are the info-level messages of a build's start
	// and end.
	StartedMsg, EndedMsg string
	// Warn and Info receive log lines (nil: none).
	Warn, Info func(msg string, args ...any)
	// OnError is told of each failed catch-up of the follower before it
	// retries (nil: only logged).
	OnError func(error)
	// Stopped returns the error CatchUp and Lock return once the consumer is
	// stopped (nil: ErrStopped).
	Stopped func() error
	// RetryDelay is how long the follower waits after a failed catch-up
	// (0: DefaultRetryDelay).
	RetryDelay time.Duration
	// Life stops the consumer, as Stop does, when it ends (nil: only Stop
	// does).
	Life context.Context
	// QuietDelay is how long the feed must bring nothing after a catch-up
	// before the follower calls a Quieter sink's Quiet (0:
	// DefaultQuietDelay).
	QuietDelay time.Duration
	// BuildQuietDocs is how many documents a catch-up must apply for it to
	// end with a Quieter sink's Quiet (0: DefaultBuildQuietDocs): the work
	// a build held back is finished before the catch-up returns, rather
	// than a quiet spell later, when requests that came after the build
	// would share the processors and the collector with it (BENCHMARKS.md,
	// issue 19: a view index's write-back after a build put the p99 of the
	// gets after it at 12-21 ms). So a catch-up that waits for a build
	// waits for that work too (one that starts during that work, its
	// target already held, does not; nor one whose target a batch
	// applied before the catch-up reached BuildQuietDocs documents, nor
	// one waiting on a catch-up that started with a backlog smaller than
	// BuildQuietDocs changes, such as a follower's under a steady stream
	// of writes: see Consumer.CatchUp).
	BuildQuietDocs int

	// pressure replaces the memory probe (tests: WithMemoryPressure).
	pressure func() bool
	// waiting, if set, is called by a catch-up to a target each time it
	// is about to wait for the right to change the sink while another
	// holds it, with whether the sink then held its target (tests:
	// WithWaitHook).
	waiting func(held bool)
}

// DefaultBuildQuietDocs is the default Options.BuildQuietDocs.
const DefaultBuildQuietDocs = 100 * BigBuild

// Consumer runs one sink on a bucket's change feed. It is safe for
// concurrent use.
type Consumer[B any] struct {
	h    *engine.Consumer
	sink Sink[B]
	opts Options

	progress   Progress
	pressure   func() bool // reports memory near its limit: smaller batches (see Options.BatchSize)
	fresh      atomic.Bool
	noAck      atomic.Bool
	rolledBack bool

	upd  chan struct{} // holds a token while the sink is being changed (a catch-up): one at a time
	kick chan struct{} // asks the follower for one catch-up

	// appliedMu guards applied, closed (and dropped) after each batch a
	// catch-up applies: a catch-up waiting for the right to change the
	// sink looks at its target again (see CatchUp). nil until one waits.
	appliedMu sync.Mutex
	applied   chan struct{}
	// build is set by the running catch-up, if it started with a backlog
	// of Options.BuildQuietDocs changes, before it applies the batch that
	// takes it to that many documents (it will end with a Quieter sink's
	// Quiet), and cleared when the next catch-up starts applying: waiters
	// then wait for the right to change the sink.
	build atomic.Bool

	life     context.Context
	cancel   context.CancelFunc
	done     chan struct{} // closed when the follower has returned
	stopOnce sync.Once
}

// Start registers h, checks the sink's position against the bucket's
// history (resetting the sink when the bucket no longer holds it, in any
// partition), acknowledges the position and starts following the feed.
// While the consumer runs, each catch-up first follows the bucket's history
// (see CatchUp).
func Start[B any](ctx context.Context, h *engine.Consumer, sink Sink[B], opts Options) (*Consumer[B], error) {
	if opts.RetryDelay <= 0 {
		opts.RetryDelay = DefaultRetryDelay
	}
	c := &Consumer[B]{h: h, sink: sink, opts: opts, pressure: opts.pressure,
		upd: make(chan struct{}, 1), kick: make(chan struct{}, 1), done: make(chan struct{})}
	if c.pressure == nil {
		c.pressure = newMemoryProbe().near
	}
	if err := h.Register(ctx); err != nil {
		return nil, err
	}
	uuid, seqs := sink.Position()
	parts, now, err := h.RollbackPartitions(uuid, seqs)
	if err == nil && len(parts) > 0 {
		err = fmt.Errorf("%w: partition %d at sequence number %d, the history holds %d",
			engine.ErrRollback, parts[0].Partition, parts[0].Seq, parts[0].Held)
	}
	if err != nil {
		if !errors.Is(err, engine.ErrRollback) {
			return nil, err
		}
		c.warn(opts.Kind+": the bucket no longer holds what the index was built from; rebuilding it", opts.LogKey, opts.LogID, "err", err)
		if err := sink.Reset(ctx); err != nil {
			return nil, err
		}
		c.rolledBack = true
		opts.Fresh = true
	}
	if err := sink.Follow(now); err != nil {
		return nil, err
	}
	c.fresh.Store(opts.Fresh)
	parent := opts.Life
	if parent == nil {
		parent = context.Background()
	}
	c.life, c.cancel = context.WithCancel(parent)
	_, seqs = sink.Position()
	if err := c.Ack(seqs); err != nil {
		c.warn(opts.Kind+": registering the index with the change feed", opts.LogKey, opts.LogID, "err", err)
	}
	go c.follow()
	return c, nil
}

// RolledBack reports whether Start reset the sink because the bucket no
// longer held its position.
func (c *Consumer[B]) RolledBack() bool { return c.rolledBack }

// Handle returns the consumer's engine handle.
func (c *Consumer[B]) Handle() *engine.Consumer { return c.h }

func (c *Consumer[B]) warn(msg string, args ...any) {
	if c.opts.Warn != nil {
		c.opts.Warn(msg, args...)
	}
}

func (c *Consumer[B]) info(msg string, args ...any) {
	if c.opts.Info != nil && msg != "" {
		c.opts.Info(msg, args...)
	}
}

func (c *Consumer[B]) stoppedErr() error {
	if c.opts.Stopped != nil {
		return c.opts.Stopped()
	}
	return ErrStopped
}

// Ack acknowledges seqs to the bucket as a position the sink holds
// durably, unless acknowledgements are paused (see PauseAcks). A sink's
// Apply acknowledges through the durable callback; Ack is for positions a
// sink reaches otherwise.
func (c *Consumer[B]) Ack(seqs []uint64) error {
	if c.noAck.Load() {
		return nil
	}
	return c.h.Ack(seqs)
}

// PauseAcks stops (true) or resumes (false) acknowledging positions: a
// consumer being replaced by another of the same name stops, so that the
// metadata purge waits for the new one.
func (c *Consumer[B]) PauseAcks(pause bool) { c.noAck.Store(pause) }

// Kick asks the follower for one catch-up in the background, without
// waiting (for a consumer that does not follow the feed on its own).
func (c *Consumer[B]) Kick() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// follow catches up whatever the feed brings (or, without Options.Auto,
// when kicked) until the consumer stops.
func (c *Consumer[B]) follow() {
	defer close(c.done)
	ctx := c.life
	q, _ := any(c.sink).(Quieter)
	delay := c.opts.QuietDelay
	if delay <= 0 {
		delay = DefaultQuietDelay
	}
	if !c.opts.Auto {
		var quiet <-chan time.Time // armed after a catch-up, for a Quieter
		for {
			select {
			case <-c.kick:
				if err := c.CatchUp(ctx, nil); err != nil && ctx.Err() == nil {
					c.warn(c.opts.Kind+": indexing failed", c.opts.LogKey, c.opts.LogID, "err", err)
				} else if q != nil {
					quiet = time.After(delay)
				}
			case <-quiet:
				quiet = nil
				c.quiet(ctx, q)
			case <-ctx.Done():
				return
			}
		}
	}
	for ctx.Err() == nil {
		if err := c.CatchUp(ctx, nil); err != nil {
			if ctx.Err() != nil || errors.Is(err, engine.ErrClosed) || errors.Is(err, ErrStopped) {
				return
			}
			if c.opts.OnError != nil {
				c.opts.OnError(err)
			}
			c.warn(c.opts.Kind+": indexing failed; retrying", c.opts.LogKey, c.opts.LogID, "err", err)
			t := time.NewTimer(c.opts.RetryDelay)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			}
			continue
		}
		uuid, seqs := c.sink.Position()
		if q != nil {
			qctx, cancel := context.WithTimeout(ctx, delay)
			err := c.h.Wait(qctx, uuid, seqs)
			cancel()
			if err == nil {
				continue
			}
			if ctx.Err() != nil || qctx.Err() == nil {
				return // stopped, or the bucket closed
			}
			c.quiet(ctx, q) // nothing came for delay
		}
		if err := c.h.Wait(ctx, uuid, seqs); err != nil {
			return
		}
	}
}

// quiet calls q's Quiet with the right to change the sink held, logging
// what fails (the next quiet spell tries again).
func (c *Consumer[B]) quiet(ctx context.Context, q Quieter) {
	unlock, err := c.Lock(ctx)
	if err != nil {
		return // stopped
	}
	defer unlock()
	c.finishHeldBack(ctx, q)
}

// finishHeldBack calls q's Quiet, logging what fails (the next quiet spell
// tries again). The caller holds the right to change the sink.
func (c *Consumer[B]) finishHeldBack(ctx context.Context, q Quieter) {
	if err := q.Quiet(ctx); err != nil && ctx.Err() == nil {
		c.warn(c.opts.Kind+": finishing work held back failed", c.opts.LogKey, c.opts.LogID, "err", err)
	}
}

// Lock takes the right to change the sink (held by every catch-up) and
// returns its release, or an error when ctx ends or the consumer stops
// first.
func (c *Consumer[B]) Lock(ctx context.Context) (unlock func(), err error) {
	select {
	case c.upd <- struct{}{}:
	case <-ctx.Done():
		if c.life.Err() != nil {
			return nil, c.stoppedErr()
		}
		return nil, ctx.Err()
	case <-c.life.Done():
		return nil, c.stoppedErr()
	}
	if c.life.Err() != nil {
		<-c.upd
		return nil, c.stoppedErr()
	}
	return func() { <-c.upd }, nil
}

// lockUnlessHeld takes the right to change the sink, as Lock does, for a
// catch-up to target, unless the sink holds target (see holds) first:
// then it returns a nil unlock and a nil error. With target nil it is
// Lock. It looks at target when called, and again after each batch the
// catch-up in progress applies unless that catch-up is a build (it
// started with a backlog of Options.BuildQuietDocs changes and has applied
// that many documents, to a Quieter sink): the sink's
// position is read before build, which the catch-up sets before the sink
// shows the batch that reaches them, so a waiter that sees that batch
// waits for the build's Quiet.
func (c *Consumer[B]) lockUnlessHeld(ctx context.Context, target []uint64) (unlock func(), err error) {
	if target == nil {
		return c.Lock(ctx)
	}
	for first := true; ; first = false {
		applied := c.appliedWait() // before the look: no batch is missed
		held := c.holds(target)
		if held && (first || !c.build.Load()) {
			return nil, nil
		}
		if c.opts.waiting != nil && len(c.upd) == cap(c.upd) {
			c.opts.waiting(held)
		}
		select {
		case c.upd <- struct{}{}:
			if c.life.Err() != nil {
				<-c.upd
				return nil, c.stoppedErr()
			}
			return func() { <-c.upd }, nil
		case <-applied:
		case <-ctx.Done():
			return nil, c.ctxErr(ctx.Err())
		case <-c.life.Done():
			return nil, c.stoppedErr()
		}
	}
}

// holds reports whether the sink holds target in the bucket's current
// history with nothing to do before a catch-up (BeforeCatchUp): what a
// catch-up to target would find, with the right to change the sink, before
// it returned having changed nothing. It is called without that right.
// The history is read before the sink's position, which is no older than
// the history it returns (see Sink.Position): a sink that follows the
// history read holds a position of that history.
func (c *Consumer[B]) holds(target []uint64) bool {
	if bc, ok := c.sink.(BeforeCatchUp); ok && bc.BeforeCatchUpDue() {
		return false
	}
	now := c.h.UUID()
	uuid, seqs := c.sink.Position()
	return uuid == now && Reached(seqs, target)
}

// Reached reports whether seqs has reached target in every partition.
func Reached(seqs, target []uint64) bool {
	for i, t := range target {
		if i >= len(seqs) || seqs[i] < t {
			return false
		}
	}
	return true
}

// Between counts the changes from sequence vector from to to.
func Between(from, to []uint64) uint64 {
	var n uint64
	for i, t := range to {
		var f uint64
		if i < len(from) {
			f = from[i]
		}
		if t > f {
			n += t - f
		}
	}
	return n
}

// Pending counts the changes the sink has not seen yet.
func (c *Consumer[B]) Pending() uint64 {
	_, seqs := c.sink.Position()
	return Between(seqs, c.h.HighSeqnos())
}

// CatchUpNow catches up to every write made when it is called, those still
// on their way to disk included (see CatchUp): what a query that must see
// every write it saw asks (stale=false, at_plus). A write acknowledged from
// memory, or a read's expiration of a document, is seen by the next such
// query.
func (c *Consumer[B]) CatchUpNow(ctx context.Context) error {
	return c.CatchUp(ctx, c.h.HighSeqnos())
}

// CatchUp applies changes until the sink reaches target (nil: until the feed
// has nothing more), first waiting for the writes up to target to be
// committed (a target from HighSeqnos counts those on their way to disk;
// the feed carries them once committed). Preparing and applying overlap: one goroutine reads the
// feed and prepares the next batch while this one applies the previous one.
// It first follows the bucket's history when it changed (see
// followHistory): a partition rolled back is read again from its start.
// It waits for a catch-up in progress (or a Quieter's Quiet) to end first,
// unless target is not nil and the sink holds it, in the bucket's current
// history and with nothing to do before a catch-up (BeforeCatchUp): then it
// returns without the right to change the sink. It looks when it starts
// (its writes committed and the bucket warm): a stale=false query with
// nothing new to see does not wait for a build's write-back. And it looks
// again after each batch the catch-up in progress applies, unless that
// catch-up is a build (one that started with a backlog of at least
// Options.BuildQuietDocs changes and has applied that many documents): a
// stale=false query under a steady stream of writes answers once the
// follower's catch-up has applied its target, without waiting for that
// catch-up to find the feed empty, however long it runs; one that waits on
// a build (which ends with a Quieter's Quiet) waits for the build's
// write-back, as the gets after a build want (see Options.BuildQuietDocs).
// It ends, with ctx's error or the stopped error, as soon as ctx ends or
// the consumer stops.
func (c *Consumer[B]) CatchUp(ctx context.Context, target []uint64) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(c.life, cancel)
	defer stop()
	if target != nil {
		// A target taken from the handle's HighSeqnos may count writes
		// still on their way to disk, which the feed carries once
		// committed.
		if err := c.h.WaitCommitted(ctx, target); err != nil {
			return c.ctxErr(err)
		}
		// The sink's position is checked against the bucket's history
		// once the warm-up is done, as with the right to change the sink
		// below.
		if err := c.h.WaitWarm(ctx); err != nil {
			return c.ctxErr(err)
		}
		if c.life.Err() != nil {
			return c.stoppedErr()
		}
		if err := ctx.Err(); err != nil {
			return c.ctxErr(err)
		}
	}
	unlock, err := c.lockUnlessHeld(ctx, target)
	if err != nil || unlock == nil {
		return err // stopped, or target held
	}
	defer unlock()
	// Until the bucket's warm-up is done its feed lacks what is not
	// loaded yet: a catch-up then would end early, short of target.
	if err := c.h.WaitWarm(ctx); err != nil {
		return c.ctxErr(err)
	}
	if err := ctx.Err(); err != nil {
		return c.ctxErr(err)
	}
	if err := c.followHistory(ctx); err != nil {
		return err
	}
	if bc, ok := c.sink.(BeforeCatchUp); ok {
		if err := bc.BeforeCatchUp(ctx, c.Ack); err != nil {
			return err
		}
	}
	_, cursor := c.sink.Position()
	if target != nil && Reached(cursor, target) {
		return nil
	}
	backlog := Between(cursor, c.h.HighSeqnos())
	c.progress.start(backlog)
	c.build.Store(false) // the last catch-up's Quiet, if any, is done
	if backlog > BigBuild {
		c.info(c.opts.StartedMsg, c.opts.LogKey, c.opts.LogID, "pending_changes", backlog)
	}
	buildDocs := cmp.Or(c.opts.BuildQuietDocs, DefaultBuildQuietDocs)
	markAt := 0 // a catch-up that started small is no build for its waiters
	if backlog >= uint64(buildDocs) {
		markAt = buildDocs
	}
	docs, err := c.pipeline(ctx, cursor, target, markAt)
	if q, ok := c.sink.(Quieter); ok && err == nil && docs >= buildDocs {
		c.finishHeldBack(ctx, q) // a build's (see Options.BuildQuietDocs)
	}
	indexed, took := c.progress.finish()
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		if ctx.Err() != nil {
			return c.ctxErr(ctx.Err())
		}
		return err
	}
	if backlog > BigBuild || c.fresh.Load() {
		c.fresh.Store(false)
		c.info(c.opts.EndedMsg, c.opts.LogKey, c.opts.LogID, "changes_indexed", indexed, "documents", docs,
			"seconds", took.Seconds(), "rate", rate(indexed, took), "pending_changes", c.Pending())
	}
	return nil
}

// followHistory brings the sink into the bucket's current history when it
// is no longer the one the sink follows (a partition's copy dropped,
// engine.Bucket.DropPartition): the partitions whose changes the sink saw
// and the history no longer holds are rewound (Sink.Rewind) and read again
// from sequence number 0 by the catch-up; when the history no longer knows
// the sink's position at all (its failover log moved past it), every
// partition is (the sink answers queries meanwhile: Reset is for Start).
// The caller holds the right to change the sink.
func (c *Consumer[B]) followHistory(ctx context.Context) error {
	uuid, seqs := c.sink.Position()
	if uuid == c.h.UUID() {
		return nil // every fall of a partition's sequence number begins a history
	}
	parts, now, err := c.h.RollbackPartitions(uuid, seqs)
	var rewind []int
	switch {
	case errors.Is(err, engine.ErrRollback):
		c.warn(c.opts.Kind+": the bucket no longer holds what the index was built from; rebuilding it", c.opts.LogKey, c.opts.LogID, "err", err)
		for p, s := range seqs {
			if s != 0 {
				rewind = append(rewind, p)
			}
		}
		c.fresh.Store(true)
	case err != nil:
		return err
	default:
		for _, r := range parts {
			rewind = append(rewind, r.Partition)
		}
		if len(rewind) > 0 {
			c.info(c.opts.Kind+": partitions rolled back (a copy dropped): their changes are read again from the start",
				c.opts.LogKey, c.opts.LogID, "partitions", rewind)
		}
	}
	if len(rewind) > 0 {
		next := slices.Clone(seqs)
		for _, p := range rewind {
			next[p] = 0
		}
		err := c.sink.Rewind(ctx, rewind, func() {
			if err := c.Ack(next); err != nil {
				c.warn(c.opts.Kind+": acknowledging changes", c.opts.LogKey, c.opts.LogID, "err", err)
			}
		})
		if err != nil {
			return fmt.Errorf("%s: roll back partitions %v: %w", c.opts.Kind, rewind, err)
		}
	}
	return c.sink.Follow(now)
}

// ctxErr is the error of a catch-up whose context ended with err.
func (c *Consumer[B]) ctxErr(err error) error {
	if c.life.Err() != nil {
		return c.stoppedErr()
	}
	return err
}

// prepared is one batch of the feed, ready to apply.
type prepared[B any] struct {
	batch   B
	docs    int
	counted uint64   // changes read for it
	next    []uint64 // the feed position after it
	err     error
}

// pipeline runs the producer and applies what it prepares, and returns the
// documents applied. With markAt above 0 (a catch-up that started with a
// backlog of Options.BuildQuietDocs changes) it marks itself a build (see
// lockUnlessHeld) before it applies the batch that takes it to markAt
// documents.
func (c *Consumer[B]) pipeline(ctx context.Context, cursor, target []uint64, markAt int) (int, error) {
	pctx, cancel := context.WithCancel(ctx)
	batches := make(chan prepared[B], 1)
	go c.produce(pctx, cursor, target, batches)
	defer func() {
		cancel()
		for range batches { // let the producer finish before returning
		}
	}()
	if _, quieter := c.sink.(Quieter); !quieter {
		markAt = 0 // no Quiet to wait for
	}
	docs := 0
	for pb := range batches {
		if pb.err != nil {
			return docs, pb.err
		}
		if err := ctx.Err(); err != nil {
			return docs, err
		}
		if markAt > 0 && docs+pb.docs >= markAt {
			// Before the sink's position shows the batch: a waiter
			// that sees it sees this too (see lockUnlessHeld).
			c.build.Store(true)
		}
		next := pb.next
		if err := c.sink.Apply(ctx, pb.batch, next, func() {
			if err := c.Ack(next); err != nil {
				c.warn(c.opts.Kind+": acknowledging changes", c.opts.LogKey, c.opts.LogID, "err", err)
			}
		}); err != nil {
			return docs, err
		}
		c.progress.applied(Between(cursor, next), pb.counted)
		docs += pb.docs
		cursor = next
		c.appliedNotify()
	}
	return docs, nil
}

// appliedWait returns a channel closed once the next batch is applied.
func (c *Consumer[B]) appliedWait() <-chan struct{} {
	c.appliedMu.Lock()
	defer c.appliedMu.Unlock()
	if c.applied == nil {
		c.applied = make(chan struct{})
	}
	return c.applied
}

// appliedNotify wakes those waiting for a batch to be applied.
func (c *Consumer[B]) appliedNotify() {
	c.appliedMu.Lock()
	defer c.appliedMu.Unlock()
	if c.applied != nil {
		close(c.applied)
		c.applied = nil
	}
}

// produce reads the feed from cursor and prepares it, batch by batch, until
// it reaches target (or the end of the feed), an error, or ctx ends. It
// closes out when it stops. Before it reads each batch it asks the memory
// probe whether the process's memory is near Go's memory limit: a batch
// then holds a quarter of Options.BatchSize (see batchSize), the next one
// the whole of it again once the memory is not. A batch also ends at
// Options.BatchBytes.
func (c *Consumer[B]) produce(ctx context.Context, cursor, target []uint64, out chan<- prepared[B]) {
	defer close(out)
	send := func(pb prepared[B]) bool {
		select {
		case out <- pb:
			return true
		case <-ctx.Done():
			return false
		}
	}
	cur, err := c.h.Changes(cursor)
	if err != nil {
		send(prepared[B]{err: err})
		return
	}
	var perChange int64 // the bytes of the last batch's changes, on average (0: none yet)
	for target == nil || !Reached(cursor, target) {
		if ctx.Err() != nil {
			return
		}
		var counted uint64
		var bytes int64
		size := batchSize(c.opts.BatchSize, c.pressure)
		read := size
		if c.opts.BatchBytes > 0 && perChange > 0 {
			// Ask the cursor for about what BatchBytes holds, so that it
			// reads (for values out of memory: from the store) little
			// that the byte bound would leave for the next batch.
			read = int(min(c.opts.BatchBytes/perChange+1, int64(^uint(0)>>1)))
			if size > 0 {
				read = min(read, size)
			}
		}
		changes := func(yield func(*engine.Document) bool) {
			for d := range cur.Next(read) {
				counted++
				if !yield(d) {
					return
				}
				// The cursor stays after the last change yielded: the
				// next batch starts with the one after it.
				if bytes += ChangeBytes(d); c.opts.BatchBytes > 0 && bytes >= c.opts.BatchBytes {
					return
				}
			}
		}
		c.progress.batchStart()
		batch, docs, err := c.sink.Prepare(ctx, changes, &c.progress)
		if err == nil {
			err = cur.Err() // a value the bucket could not read back
		}
		next := cur.Position()
		if err == nil && counted == 0 && Reached(cursor, next) {
			return // nothing new: the feed is at its end
		}
		if counted > 0 {
			perChange = max(bytes/int64(counted), 1)
		}
		c.progress.batchEnd(counted, size < c.opts.BatchSize)
		if !send(prepared[B]{batch: batch, docs: docs, counted: counted, next: next, err: err}) || err != nil {
			return
		}
		cursor = next
	}
}

// ChangeBytes is what a change counts toward Options.BatchBytes: its key
// and value.
func ChangeBytes(d *engine.Document) int64 { return int64(len(d.Key) + len(d.Value)) }

// Stop stops following the feed and ends any catch-up, and returns once
// none runs: promptly, whatever the backlog. The sink is then the caller's
// to close. Later calls do nothing.
func (c *Consumer[B]) Stop() {
	c.stopOnce.Do(func() {
		c.cancel()
		<-c.done
		c.upd <- struct{}{} // wait out a catch-up a caller started (cancelled too); never released
	})
}

// BuildInfo returns the build progress: the current catch-up's, or the last
// one's when none runs.
func (c *Consumer[B]) BuildInfo() BuildInfo { return c.progress.info(c.Pending()) }

// Progress follows the current catch-up (build) of a consumer, or the last
// one when none runs. It counts changes: those of batches applied (settled)
// and those prepared but not yet applied (ahead).
type Progress struct {
	mu       sync.Mutex
	building bool
	started  time.Time
	ended    time.Time
	backlog  uint64 // changes pending when it started
	settled  uint64 // changes applied since it started
	ahead    uint64 // changes prepared, not yet applied
	batch    uint64 // changes of the batch being prepared reported by the sink
	small    uint64 // batches read at a reduced size, memory near its limit
}

func (p *Progress) start(backlog uint64) {
	p.mu.Lock()
	p.building, p.started, p.backlog, p.settled, p.ahead, p.small = true, time.Now(), backlog, 0, 0, 0 // wall clock: build rate and ETA
	p.mu.Unlock()
}

// Prepared counts n changes prepared: a sink calls it as it works through a
// batch. Changes of a batch it does not count are counted when Prepare
// returns.
func (p *Progress) Prepared(n uint64) {
	p.mu.Lock()
	p.ahead += n
	p.batch += n
	p.mu.Unlock()
}

func (p *Progress) batchStart() {
	p.mu.Lock()
	p.batch = 0
	p.mu.Unlock()
}

// batchEnd counts what the sink did not of the counted changes of a batch,
// and the batch as a small one if it was read at a reduced size.
func (p *Progress) batchEnd(counted uint64, small bool) {
	p.mu.Lock()
	if counted > p.batch {
		p.ahead += counted - p.batch
	}
	if small && counted > 0 {
		p.small++
	}
	p.mu.Unlock()
}

// applied records a batch applied: seqs changes of the feed, counted of them
// counted as prepared before (the feed gives a document's latest version
// once, however many changes it had).
func (p *Progress) applied(seqs, counted uint64) {
	p.mu.Lock()
	p.settled += seqs
	p.ahead -= min(counted, p.ahead)
	p.mu.Unlock()
}

func (p *Progress) finish() (settled uint64, took time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.building, p.ended = false, time.Now() // wall clock: build rate and ETA
	p.ahead = 0
	return p.settled, p.ended.Sub(p.started)
}

// BuildInfo is a consumer's build progress, as a view index's _info shows
// it.
type BuildInfo struct {
	// Building is true while the consumer is catching up with the feed.
	Building bool `json:"building"`
	// Indexed counts the changes the current build (the last one when none
	// runs) has indexed.
	Indexed uint64 `json:"docs_indexed"`
	// ToIndex counts the changes the index has not seen yet.
	ToIndex uint64 `json:"docs_to_index"`
	// Rate is Indexed per second over the current (or last) build.
	Rate float64 `json:"rate"`
	// ETA is ToIndex over Rate, in seconds, while building (0 otherwise or
	// before a rate is known).
	ETA float64 `json:"eta_seconds"`
	// SmallBatches counts the batches of the current (or last) build read
	// at a quarter of Options.BatchSize because the process's memory was
	// near Go's memory limit (see Options.BatchSize): a build that slows
	// for want of memory says so here.
	SmallBatches uint64 `json:"batches_near_memory_limit"`
}

func (p *Progress) info(pending uint64) BuildInfo {
	p.mu.Lock()
	defer p.mu.Unlock()
	indexed := p.settled + p.ahead
	bi := BuildInfo{Building: p.building, Indexed: indexed, ToIndex: pending - min(p.ahead, pending), SmallBatches: p.small}
	end := p.ended
	if p.building {
		end = time.Now() // wall clock: build rate and ETA
	}
	if !p.started.IsZero() {
		bi.Rate = rate(indexed, end.Sub(p.started))
	}
	if p.building && bi.Rate > 0 {
		bi.ETA = float64(bi.ToIndex) / bi.Rate
	}
	return bi
}

// rate is n over d, per second.
func rate(n uint64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}
