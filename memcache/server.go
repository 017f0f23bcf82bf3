package memcache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mayflydb/mayfly/engine"
)

// Server speaks memcached's text protocol onto one engine bucket (its
// default collection). It is safe for concurrent use; one Server may Serve
// several listeners.
type Server struct {
	// tgt is the bucket served and its default collection; it moves to
	// the bucket's replacement when the bucket restarts (a change of its
	// evictionPolicy, engine.Bucket.Reopened). Read it through target.
	tgt     atomic.Pointer[target]
	clock   engine.Clock
	opts    Options
	log     *slog.Logger
	started int64 // engine clock at New, for the uptime stat

	stats     counters
	verbosity atomic.Uint32
	fwd       forwarder // connections to the leaders (Options.Route)

	// since is the bucket's engine counters at the last "stats reset",
	// which the port's evictions and store_no_memory count from; nil
	// before any reset.
	since atomic.Pointer[engineBaseline]

	// writesWait says whether a write at the connection's level waits for
	// the disk (the level persists, on a couchbase bucket); it follows the
	// bucket's durabilityMinLevel. An event loop hands such writes off.
	writesWait atomic.Bool
	watchMu    sync.Mutex // guards stopWatch, and the move to a restarted bucket
	stopWatch  func()
	watchOff   bool // set by Close: a bucket found later is not watched

	// flushAt is the engine-clock second at which a delayed flush_all takes
	// effect, 0 when none is pending. flushMu serialises the flushes.
	flushAt atomic.Int64
	flushMu sync.Mutex

	// ctx is cancelled by Close; every connection and helper goroutine
	// watches it. wg counts those goroutines.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu struct {
		sync.Mutex
		closed    bool
		flusher   bool        // a flushLoop goroutine is running
		ev        *eventLoops // started by the first Serve with IOEventLoop
		evFailed  bool        // they could not start
		listeners map[net.Listener]struct{}
		addr      net.Addr // the first listener's, for "stats settings"
	}
}

// New returns a Server for bucket b. A nil opts means DefaultOptions(). It
// starts nothing: call Serve or ListenAndServe. b may be nil when opts has
// Lookup and Clock: the server then serves the bucket once Lookup finds it.
func New(b *engine.Bucket, opts *Options) (*Server, error) {
	o := Options{}
	if opts != nil {
		o = *opts
	}
	if b == nil && (o.Lookup == nil || o.Clock == nil) {
		return nil, fmt.Errorf("%w: nil bucket without Lookup and Clock", ErrInvalidOptions)
	}
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if b == nil {
		s := &Server{clock: o.Clock, opts: o, log: o.Logger, started: o.Clock.Now()}
		s.tgt.Store(&target{})
		s.ctx, s.cancel = context.WithCancel(context.Background())
		s.mu.listeners = make(map[net.Listener]struct{})
		return s, nil
	}
	if t := b.Settings().Type; t == engine.Memcached && o.Durability != engine.DurabilityUnset && o.Durability != engine.DurabilityNone {
		// Every write would fail (engine.ErrDurabilityNotSupported), as
		// the bucket's durabilityMinLevel takes none alone.
		return nil, fmt.Errorf("%w: Durability %s: memcached buckets take no durability level but none", ErrInvalidOptions, o.Durability)
	}
	if t := b.Settings().Type; t != engine.Couchbase && o.Durability.Persists() && o.Durability != engine.DurabilityUnset {
		// Every write would fail (engine.ErrInvalidDurability), as
		// Couchbase refuses such a level on a bucket without a disk.
		return nil, fmt.Errorf("%w: Durability %s: the bucket is of type %s, which keeps nothing on disk: its durability levels are none and majority", ErrInvalidOptions, o.Durability, t)
	}
	s := &Server{
		clock: b.Clock(), opts: o, log: o.Logger,
		started: b.Clock().Now(),
	}
	s.tgt.Store(&target{bucket: b, coll: b.DefaultCollection()})
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.mu.listeners = make(map[net.Listener]struct{})
	s.writesWait.Store(s.waitsAt(b.Settings()))
	s.stopWatch = b.WatchSettings(func(_, updated engine.BucketSettings) { s.writesWait.Store(s.waitsAt(updated)) })
	return s, nil
}

// target is what a Server serves: a bucket and its default collection,
// both nil while the bucket of a Server made without one is not created.
type target struct {
	bucket *engine.Bucket
	coll   *engine.Collection
}

// target returns the bucket served now: the one given to New or, once that
// one restarted, its replacement (the KV port's connections follow a
// restart the same way).
func (s *Server) target() *target {
	t := s.tgt.Load()
	if t.bucket == nil {
		if nb, err := s.opts.Lookup(); err == nil && !nb.Closed() {
			return s.follow(t, nb)
		}
		return t
	}
	if nb := t.bucket.Reopened(); nb != nil {
		return s.follow(t, nb)
	}
	return t
}

// current returns the target a command runs on: target's, or, when its
// bucket is closed (deleted) and Options.Lookup finds another of its name
// (created again), that one, which the server serves from then on. The
// error, Lookup's, says there is none: the command is answered with it.
func (s *Server) current() (*target, error) {
	t := s.target()
	if t.bucket != nil && (s.opts.Lookup == nil || !t.bucket.Closed()) {
		return t, nil
	}
	nb, err := s.opts.Lookup()
	if err != nil {
		return nil, err
	}
	if t.bucket == nil && nb.Closed() {
		return nil, fmt.Errorf("%w: %s", engine.ErrBucketNotFound, nb.Name())
	}
	if nb == t.bucket || nb.Closed() {
		return t, nil // its calls answer ErrClosed
	}
	return s.follow(t, nb), nil
}

// follow moves the server from old to nb, old's replacement (a restart of
// the same bucket, or a bucket created again under its name), unless
// another command moved it already, and watches nb's settings instead. A
// delayed flush_all pending for another incarnation of the bucket is
// dropped: the documents it was for went with it.
func (s *Server) follow(old *target, nb *engine.Bucket) *target {
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	if t := s.tgt.Load(); t != old {
		return t
	}
	if old.bucket == nil || nb.Settings().UUID != old.bucket.Settings().UUID {
		s.flushAt.Store(0)
	}
	t := &target{bucket: nb, coll: nb.DefaultCollection()}
	if !s.watchOff {
		if s.stopWatch != nil {
			s.stopWatch()
		}
		s.stopWatch = nb.WatchSettings(func(_, updated engine.BucketSettings) { s.writesWait.Store(s.waitsAt(updated)) })
	}
	s.writesWait.Store(s.waitsAt(nb.Settings()))
	s.tgt.Store(t)
	return t
}

// writesWaitNow reports whether a write of the connections' waits for
// more than memory: for the disk at their level (writesWait), or, on a
// bucket whose writes are replicated (a cluster node's), for its log
// entry's commit whatever the level. An event loop hands such writes off.
func (s *Server) writesWaitNow() bool {
	b := s.target().bucket
	return s.writesWait.Load() || (b != nil && b.Replicated())
}

// waitsAt reports whether a write of the connections' level waits for the
// disk under bucket settings st.
func (s *Server) waitsAt(st engine.BucketSettings) bool {
	return st.Type == engine.Couchbase && s.opts.Durability.Max(st.DurabilityMinLevel).Persists()
}

// eventLoops returns the server's event loops, starting them at the first
// call; nil when connections get goroutines (IOGoroutines, or the loops
// could not start: then it logs why, once).
func (s *Server) eventLoops() *eventLoops {
	if s.opts.IO != IOEventLoop {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.ev == nil && !s.mu.closed && !s.mu.evFailed {
		ev, err := s.startEventLoops()
		if err != nil {
			s.log.Error("memcache: event loops did not start; serving connections from goroutines", "err", err)
			s.mu.evFailed = true
			return nil
		}
		s.mu.ev = ev
	}
	return s.mu.ev
}

// ListenAndServe listens on the TCP address addr and serves it until ctx is
// done or Close is called.
func (s *Server) ListenAndServe(ctx context.Context, addr string) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("memcache: listen on %s: %w", addr, err)
	}
	return s.Serve(ctx, ln)
}

// Serve accepts connections on ln and serves each in its own goroutine. It
// returns when ctx is done (ctx.Err()), when Close is called
// (ErrServerClosed), or when Accept fails for good. Before it returns it
// closes ln and the connections it accepted, and waits for them.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	s.mu.listeners[ln] = struct{}{}
	s.stats.totalConns.Add(1) // memcached counts each listening socket in total_connections
	if s.mu.addr == nil {
		s.mu.addr = ln.Addr()
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.mu.listeners, ln)
		s.mu.Unlock()
	}()

	ctx, cancel := context.WithCancel(ctx)
	stopOnClose := context.AfterFunc(s.ctx, cancel)
	defer stopOnClose()
	stopLn := context.AfterFunc(ctx, func() { ln.Close() })
	defer stopLn()

	var conns sync.WaitGroup
	defer conns.Wait()
	defer cancel() // runs before conns.Wait: close this listener's connections
	ev := s.eventLoops()
	if ev != nil {
		// Once ctx is done, the loops close this listener's connections.
		context.AfterFunc(ctx, ev.sweep)
	}

	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.ctx.Err() != nil {
				return ErrServerClosed
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log.Warn("memcache: accept", "err", err, "retry_in", backoff)
				sleepCtx(ctx, backoff) // a done ctx is seen on the next round
				continue
			}
			ln.Close()
			return fmt.Errorf("memcache: accept: %w", err)
		}
		backoff = 0
		if s.stats.currConns.Add(1) > int64(s.opts.MaxConns) {
			s.stats.currConns.Add(-1)
			s.stats.rejectedConns.Add(1)
			s.log.Debug("memcache: refusing connection", "remote", nc.RemoteAddr(), "err", ErrTooManyConnections)
			// A few bytes on a fresh socket: the kernel buffer takes them.
			nc.Write([]byte(replyTooManyConns + "\r\n"))
			nc.Close()
			continue
		}
		s.mu.Lock()
		if s.mu.closed {
			s.mu.Unlock()
			s.stats.currConns.Add(-1)
			nc.Close()
			continue
		}
		s.wg.Add(1)
		conns.Add(1)
		s.mu.Unlock()
		s.stats.totalConns.Add(1)
		if ev != nil && ev.add(ctx, nc, func() {
			s.stats.currConns.Add(-1)
			conns.Done()
			s.wg.Done()
		}) {
			continue
		}
		go func() {
			defer s.wg.Done()
			defer conns.Done()
			defer s.stats.currConns.Add(-1)
			s.serveConn(ctx, nc)
		}()
	}
}

// sleepCtx sleeps for d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// Close stops every listener, closes every connection and waits until all
// the server's goroutines have returned. Serve then returns ErrServerClosed.
// Close is idempotent. It takes no context because what it waits for is
// unblocked by the closing itself: connections are closed and every
// engine call's context is cancelled, so it returns promptly.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		s.wg.Wait()
		return nil
	}
	s.mu.closed = true
	var lns []net.Listener
	for ln := range s.mu.listeners {
		lns = append(lns, ln)
	}
	ev := s.mu.ev
	s.mu.Unlock()
	s.watchMu.Lock()
	s.watchOff = true // a restart seen after Close watches nothing
	if s.stopWatch != nil {
		s.stopWatch()
		s.stopWatch = nil
	}
	s.watchMu.Unlock()
	s.cancel()
	s.fwd.close()
	if ev != nil {
		ev.stop()
	}
	var first error
	for _, ln := range lns {
		if err := ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) && first == nil {
			first = err
		}
	}
	s.wg.Wait()
	return first
}

// listenAddr returns the port and interface of the first listener, as
// "stats settings" shows them.
func (s *Server) listenAddr() (port, iface string) {
	s.mu.Lock()
	a := s.mu.addr
	s.mu.Unlock()
	if a == nil {
		return "0", "NULL"
	}
	h, p, err := net.SplitHostPort(a.String())
	if err != nil {
		return "0", a.String()
	}
	return p, h
}

// Delayed flush_all.
//
// memcached's "flush_all N" (N > 0) sets oldest_live to realtime(N)-1: once
// the clock reaches that second, every item stored at or before it is gone.
// So N = 1 flushes at once, and N = 2 in one second. Mayfly keeps the moment
// (engine clock) in flushAt and, at the first command at or after it (or at
// the next poll of flushLoop), flushes the bucket before doing anything else.

// flushAllAt returns the engine-clock second at which "flush_all delay"
// takes effect; a value <= now means at once.
func flushAllAt(now, delay int64) int64 {
	if delay <= 0 {
		return now
	}
	return engine.AbsoluteExpiry(now, delay) - 1
}

// flushEnabled reports whether the bucket served lets itself be flushed
// (its flushEnabled setting, which the REST API's doFlush obeys too).
func (s *Server) flushEnabled() bool {
	return s.settings().FlushEnabled
}

// flushAll runs or schedules a flush_all with the given delay.
func (s *Server) flushAll(ctx context.Context, delay int64) error {
	now := s.clock.Now()
	at := flushAllAt(now, delay)
	if at <= now {
		s.flushMu.Lock()
		defer s.flushMu.Unlock()
		s.flushAt.Store(0)
		return s.flushNow(ctx)
	}
	s.flushAt.Store(at)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.mu.flusher && !s.mu.closed {
		s.mu.flusher = true
		s.wg.Add(1)
		go s.flushLoop()
	}
	return nil
}

// flushIfDue runs a pending delayed flush_all whose moment has come.
func (s *Server) flushIfDue(ctx context.Context) error {
	at := s.flushAt.Load()
	if at == 0 || s.clock.Now() < at {
		return nil
	}
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	if _, err := s.current(); err != nil {
		// The bucket is deleted, its documents with it: nothing is left
		// to flush, and a bucket created again later is another one.
		s.flushAt.CompareAndSwap(at, 0)
		return fmt.Errorf("memcache: delayed flush_all dropped: %w", err)
	}
	if s.flushAt.Load() != at {
		return nil // done meanwhile, replaced by another flush_all, or for a deleted bucket
	}
	if !s.flushEnabled() {
		// Flush was disabled on the bucket since the flush_all was
		// accepted: it is dropped rather than run against the setting.
		s.flushAt.CompareAndSwap(at, 0)
		s.log.Warn("memcache: delayed flush_all dropped: flush is disabled on the bucket", "bucket", s.bucketName())
		return nil
	}
	if err := s.flushNow(ctx); err != nil {
		return err
	}
	s.flushAt.CompareAndSwap(at, 0)
	return nil
}

// flushNow flushes the bucket served: through Options.Flush when set.
func (s *Server) flushNow(ctx context.Context) error {
	b := s.target().bucket
	if s.opts.Flush != nil {
		return s.opts.Flush(ctx, b)
	}
	_, err := b.Flush(ctx)
	return err
}

// delayedOnCluster reports whether a flush_all with delay would be
// scheduled (not run at once) on a bucket whose writes are replicated,
// which refuses it (replyDelayedFlush).
func (s *Server) delayedOnCluster(delay int64) bool {
	now := s.clock.Now()
	b := s.target().bucket
	return flushAllAt(now, delay) > now && b != nil && b.Replicated()
}

// settings returns the settings of the bucket served, zero while there is
// none yet.
func (s *Server) settings() engine.BucketSettings {
	if b := s.target().bucket; b != nil {
		return b.Settings()
	}
	return engine.BucketSettings{}
}

// bucketName returns the name of the bucket served (or to be served).
func (s *Server) bucketName() string {
	if b := s.target().bucket; b != nil {
		return b.Name()
	}
	return s.opts.BucketName
}

// flushLoop polls a pending delayed flush_all, so it happens on time even
// when no command arrives. It returns once nothing is pending, or on Close.
func (s *Server) flushLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.opts.private.flushPoll)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			s.mu.Lock()
			s.mu.flusher = false
			s.mu.Unlock()
			return
		case <-t.C:
		}
		if err := s.flushIfDue(s.ctx); err != nil {
			s.log.Warn("memcache: delayed flush_all", "err", err)
		}
		s.mu.Lock()
		if s.flushAt.Load() == 0 {
			s.mu.flusher = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
	}
}
