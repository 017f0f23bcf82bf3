package kv

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
	"github.com/mayflydb/mayfly/internal/ratelimit"
)

// The lines about logins refused unchecked: a burst of 10, then one a
// second, each saying how many were left out before it.
const (
	notCheckedLogRate  = 1.0
	notCheckedLogBurst = 10
)

// Server serves the binary KV protocol onto every bucket of an engine. It
// is safe for concurrent use; one Server may Serve several listeners.
type Server struct {
	eng  *engine.Engine
	opts Options
	log  *slog.Logger

	conns atomic.Int64 // connections open now

	// notChecked limits the lines about logins refused unchecked
	// (throttled, busy): a flood of them costs a few lines a second.
	notChecked *ratelimit.Bucket

	// ctx is cancelled by Close; every connection watches it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu struct {
		sync.Mutex
		closed    bool
		listeners map[net.Listener]struct{}
	}
}

// New returns a Server over eng. A nil opts means DefaultOptions(). It
// starts nothing: call Serve or ListenAndServe.
func New(eng *engine.Engine, opts *Options) (*Server, error) {
	if eng == nil {
		return nil, fmt.Errorf("%w: nil engine", ErrInvalidOptions)
	}
	o := Options{}
	if opts != nil {
		o = *opts
	}
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	s := &Server{eng: eng, opts: o, log: o.Logger, notChecked: ratelimit.New(notCheckedLogRate, notCheckedLogBurst, func() time.Time { return time.Unix(eng.Clock().Now(), 0) })}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.mu.listeners = make(map[net.Listener]struct{})
	return s, nil
}

// ListenAndServe listens on the TCP address addr and serves it until ctx is
// done or Close is called.
func (s *Server) ListenAndServe(ctx context.Context, addr string) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("kv: listen on %s: %w", addr, err)
	}
	return s.Serve(ctx, ln)
}

// Serve accepts connections on ln and serves each in its own goroutine.
// ln may be a TLS listener (crypto/tls.NewListener): its connections
// handshake within Options.IdleTimeout, and GET_CLUSTER_CONFIG on them
// fills in the kvSSL port where Options.Ports has none. It
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
				s.log.Warn("kv: accept", "err", err, "retry_in", backoff)
				sleepCtx(ctx, backoff)
				continue
			}
			ln.Close()
			return fmt.Errorf("kv: accept: %w", err)
		}
		backoff = 0
		if s.conns.Add(1) > int64(s.opts.MaxConns) {
			s.conns.Add(-1)
			s.log.Debug("kv: refusing connection: too many", "remote", nc.RemoteAddr())
			nc.Close()
			continue
		}
		s.mu.Lock()
		if s.mu.closed {
			s.mu.Unlock()
			s.conns.Add(-1)
			nc.Close()
			continue
		}
		s.wg.Add(1)
		conns.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			defer conns.Done()
			defer s.conns.Add(-1)
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
// the server's goroutines have returned. Serve then returns
// ErrServerClosed. Close is idempotent.
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
	s.mu.Unlock()
	s.cancel()
	var first error
	for _, ln := range lns {
		if err := ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) && first == nil {
			first = err
		}
	}
	s.wg.Wait()
	return first
}
