package memcache

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/mayflydb/mayfly/engine"
)

// Options configure a Server. A nil *Options means DefaultOptions().
type Options struct {
	// MaxConns is the most client connections open at once; one more is
	// answered "ERROR Too many open connections" and closed, as memcached
	// does. The default value is 1024 (memcached's -c).
	MaxConns int
	// MaxLineLen is the longest command line, in bytes, other than a
	// retrieval (get, gets, gat, gats); a longer one closes the connection,
	// as memcached does for 2048 bytes without a newline. The default value
	// is 2048 (bytes).
	MaxLineLen int
	// MaxGetLineLen is the longest retrieval line, in bytes: a multi-get of
	// many keys, which memcached lets grow without bound. A longer one closes
	// the connection. The default value is 1048576 (bytes).
	MaxGetLineLen int
	// MaxItemSize is the largest item, in bytes, counted as memcached counts
	// it (value, key and a 56-byte header; 4 more bytes for non-zero flags);
	// a larger one is refused with "SERVER_ERROR object too large for cache".
	// At most engine.MaxValueLen. The default value is 1048576 (bytes, as
	// memcached's -I).
	MaxItemSize int
	// IdleTimeout closes a connection that has sent nothing for this long
	// between commands (memcached's -o idle_timeout), counted in the
	// idle_kicks stat. The default value is 5m; a negative value never
	// closes one.
	IdleTimeout time.Duration
	// CommandTimeout closes a connection whose command (line and data
	// block) has begun to arrive but not finished within this long, counted
	// in idle_kicks too: half a command cannot hold a connection slot. The
	// default value is 30s; a negative value waits for ever.
	CommandTimeout time.Duration
	// Logger receives connection-level log lines. The default value discards
	// them.
	Logger *slog.Logger
	// Version is what the version command and the version stat report. The
	// default value is "1.6.18-mayfly".
	Version string
	// Audit, if set, is called before each flush_all (immediate or delayed)
	// takes effect or is scheduled; if it returns an error the flush_all is
	// refused with "SERVER_ERROR audit log unavailable" and nothing is
	// flushed. The default value audits nothing.
	Audit func(ctx context.Context, e AuditEvent) error
	// Flush, if set, flushes the bucket for a flush_all that takes effect
	// (a cluster node passes one that flushes every node, each partition
	// by its leader); its error is the flush_all's SERVER_ERROR reply. The
	// default value is the bucket's own Flush. On a bucket whose writes
	// are replicated a delayed flush_all is refused (replyDelayedFlush).
	Flush func(ctx context.Context, b *engine.Bucket) error
	// Route, on a cluster node, says where a command for key is carried
	// out: a Route without Addr here, else at the leader of the key's
	// partition, whose memcached port it is forwarded to (forward.go). An
	// error (the partition has no leader at the moment) is the command's
	// SERVER_ERROR reply. nil carries every command out here. On an event
	// loop (IOEventLoop) it is called with a context already done: it
	// must then answer from what it knows, without waiting, since the
	// loop serves many connections.
	Route func(ctx context.Context, key string) (Route, error)
	// Lookup, if set, returns the bucket the server is to serve now: the
	// bucket of the served one's name (under mayfly serve,
	// Engine.Bucket(--memcached-bucket)). It is asked when the bucket
	// served is closed, at the next command that needs one: a bucket
	// deleted and created again under its name is served from then on,
	// by every connection, old and new. While it returns an error (no
	// bucket of that name), each such command is answered SERVER_ERROR
	// with the error's text ("bucket not found: NAME"), and nothing else
	// is done. nil keeps the bucket given to New (or its replacement after
	// a restart, engine.Bucket.Reopened) for good: once it is deleted,
	// every command is answered "SERVER_ERROR the bucket is closed".
	Lookup func() (*engine.Bucket, error)
	// Clock and BucketName stand for the bucket's clock and name when New
	// is given none (nil, with Lookup set: the bucket is not created
	// yet). Until Lookup finds it, each command that needs a bucket is
	// answered SERVER_ERROR with Lookup's error, and the stats show an
	// empty bucket.
	Clock      engine.Clock
	BucketName string
	// Durability is the durability level of every write a connection makes
	// (the text protocol has no field for one): the bucket's
	// durabilityMinLevel raises it, never lowers it. The default value,
	// engine.DurabilityUnset, takes the bucket's minimum. A level that
	// persists is refused (New) for a bucket that keeps nothing on disk
	// (ephemeral), and any level but none for a memcached bucket.
	Durability engine.Durability
	// IO chooses how connections are served: IOEventLoop, a few event
	// loops on epoll that each serve many connections (Linux only), or
	// IOGoroutines, a goroutine per connection. The default value is
	// DefaultIO: IOEventLoop on Linux, IOGoroutines elsewhere.
	IO IOModel

	private struct {
		// flushPoll is how often a pending delayed flush_all is checked
		// against the engine clock when no command arrives. Default 1s.
		flushPoll time.Duration
		// perKeyGets makes a multi-get ask each remote key's leader in
		// turn, one round trip a key, as before batches (forwardget.go):
		// the baseline of BenchmarkForwardedMultiGet.
		perKeyGets bool
		// noRebatch makes a multi-get ask the keys of a batch a node
		// refused (or could not be reached for) alone, one round trip a
		// key, as before rebatch (forwardget.go): the baseline of
		// BenchmarkForwardedMultiGetRefused.
		noRebatch bool
	}
}

// IOModel is how a Server serves its connections (Options.IO).
type IOModel string

// The ways to serve connections.
const (
	// IOEventLoop serves connections from event loops on epoll, one per
	// GOMAXPROCS, each with its own epoll instance: a loop reads what is
	// ready, runs every complete command, and answers a batch with one
	// write. A command that must wait (a write at a durable level, a
	// flush_all) is handed off, and the connection's later commands wait
	// behind it while other connections go on. Linux only.
	IOEventLoop IOModel = "eventloop"
	// IOGoroutines serves each connection from a goroutine of its own that
	// blocks on its reads (Go's netpoller).
	IOGoroutines IOModel = "goroutines"
)

// AuditEvent is what Options.Audit is told of an administrative command.
type AuditEvent struct {
	// Action is "memcached.flush_all".
	Action string
	// Remote is the client's address.
	Remote string
	// Delay is flush_all's delay as given (0 for none).
	Delay int64
}

// ActionFlushAll is the AuditEvent action of flush_all.
const ActionFlushAll = "memcached.flush_all"

// DefaultVersion is the version the server reports when Options.Version is
// empty: the memcached release whose text protocol it speaks.
const DefaultVersion = "1.6.18-mayfly"

// Defaults of the connection timeouts.
const (
	// DefaultIdleTimeout is Options.IdleTimeout's default.
	DefaultIdleTimeout = 5 * time.Minute
	// DefaultCommandTimeout is Options.CommandTimeout's default.
	DefaultCommandTimeout = 30 * time.Second
)

// DefaultOptions returns the options a Server uses when given nil.
func DefaultOptions() *Options {
	o := &Options{}
	o.EnsureDefaults()
	return o
}

// EnsureDefaults fills in every unset field with its default.
func (o *Options) EnsureDefaults() {
	if o.MaxConns == 0 {
		o.MaxConns = 1024
	}
	if o.MaxLineLen == 0 {
		o.MaxLineLen = 2048
	}
	if o.MaxGetLineLen == 0 {
		o.MaxGetLineLen = 1 << 20
	}
	if o.MaxItemSize == 0 {
		o.MaxItemSize = 1 << 20
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.CommandTimeout == 0 {
		o.CommandTimeout = DefaultCommandTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Version == "" {
		o.Version = DefaultVersion
	}
	if o.IO == "" {
		o.IO = DefaultIO
	}
	if o.private.flushPoll == 0 {
		o.private.flushPoll = time.Second
	}
}

// minLineLen is the shortest MaxLineLen allowed: room for a storage command
// with a key of 250 bytes and every number at its longest.
const minLineLen = 512

// Validate reports the first option out of range, naming it.
func (o *Options) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidOptions, fmt.Sprintf(format, args...))
	}
	switch {
	case o.MaxConns < 1:
		return bad("MaxConns must be positive, got %d", o.MaxConns)
	case o.MaxLineLen < minLineLen:
		return bad("MaxLineLen must be at least %d, got %d", minLineLen, o.MaxLineLen)
	case o.MaxGetLineLen < o.MaxLineLen:
		return bad("MaxGetLineLen must be at least MaxLineLen (%d), got %d", o.MaxLineLen, o.MaxGetLineLen)
	case o.MaxItemSize < itemHeaderLen+maxKeyLen+8 || o.MaxItemSize > engine.MaxValueLen:
		return bad("MaxItemSize must be between %d and %d, got %d", itemHeaderLen+maxKeyLen+8, engine.MaxValueLen, o.MaxItemSize)
	case containsNewline(o.Version):
		return bad("Version must not contain a newline")
	case o.IO != IOGoroutines && o.IO != IOEventLoop:
		return bad("IO must be %q or %q, got %q", IOEventLoop, IOGoroutines, o.IO)
	case o.IO == IOEventLoop && !eventLoopSupported:
		return bad("IO %q needs Linux's epoll", IOEventLoop)
	}
	if _, err := engine.ParseDurability(string(o.Durability)); err != nil {
		return bad("Durability: %v", err)
	}
	return nil
}

func containsNewline(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '\r' || s[i] == '\n' {
			return true
		}
	}
	return false
}

// itemHeaderLen is memcached's per-item overhead on a 64-bit build: the
// 48-byte item header plus the 8-byte CAS.
const itemHeaderLen = 48 + 8

// itemSize is the size memcached gives an item (item_make_header plus the
// CAS): header, key and its NUL, 4 bytes of flags unless they are 0, the
// value and its "\r\n". It decides "object too large for cache".
func itemSize(nkey int, flags uint32, vlen int) int {
	n := itemHeaderLen + nkey + 1 + vlen + 2
	if flags != 0 {
		n += 4
	}
	return n
}
