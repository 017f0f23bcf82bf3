package cluster

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// zapToSlog is a zap logger that hands etcd's log lines at warn level and
// above to Mayfly's slog logger, so an embedded member or client says
// nothing on stderr of its own.
// While quiet is set (the node is stopping), etcd's lines go at debug
// level: members and clients closing warn about every connection they
// drop.
//
// A member's prober reports an unreachable peer every 5 s per round
// tripper for as long as the peer is down; that report goes at warn level
// once per peer, then at debug level until the peer is back, which goes
// at info level once (see peerHealth).
func zapToSlog(l *slog.Logger, quiet *atomic.Bool) *zap.Logger {
	return zap.New(&slogCore{l: l, min: zapcore.WarnLevel, quiet: quiet, peers: &peerHealth{}})
}

// etcd's messages about a peer's health (etcdserver/api/rafthttp).
const (
	// msgProberUnhealthy is the prober's report, every 5 s per round
	// tripper while the peer does not answer, with the peer's ID in
	// fieldProberPeer.
	msgProberUnhealthy = "prober detected unhealthy status"
	fieldProberPeer    = "remote-peer-id"
	// msgPeerActive is said at info level when a peer's stream works
	// again, with the peer's ID in fieldActivePeer.
	msgPeerActive   = "peer became active"
	fieldActivePeer = "peer-id"
	// unhealthyGap is a pause in a peer's unhealthy reports that means it
	// answered in between: a prober that finds the peer healthy checks
	// again only 30 s later.
	unhealthyGap = 20 * time.Second
)

// peerHealth is what the bridge knows of the peers' health: the peers
// reported unreachable, with the time of their last report. It is shared
// by a logger and every logger derived from it.
type peerHealth struct {
	mu   sync.Mutex
	down map[string]time.Time
}

// unhealthy records a prober's report on peer at t; it reports whether
// the peer was not already known unreachable (the report is news).
func (h *peerHealth) unhealthy(peer string, t time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	last, known := h.down[peer]
	if h.down == nil {
		h.down = map[string]time.Time{}
	}
	h.down[peer] = t
	return !known || t.Sub(last) > unhealthyGap
}

// active records that peer answers again; it reports whether the peer
// was known unreachable.
func (h *peerHealth) active(peer string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, known := h.down[peer]
	delete(h.down, peer)
	return known
}

// benign reports whether an etcd warning says nothing about Mayfly's use
// of it: the member serves gRPC and HTTP on its one client port, and its
// clients have no users (no authentication tokens, signed or not). Those
// go at debug level.
func benign(msg string) bool {
	return strings.HasPrefix(msg, "Running http and grpc server on single port") ||
		strings.HasPrefix(msg, "simple token is not cryptographically signed")
}

// freshMemberStorageVersion reports etcd's error that a new member's
// storage has no term yet when it first checks its schema version (logged
// at error level once per new member); it tries again later and succeeds.
// The same message with another cause is kept.
func freshMemberStorageVersion(msg string, fields map[string]any) bool {
	if msg != "failed to update storage version" {
		return false
	}
	cause, _ := fields["error"].(string)
	return strings.Contains(cause, "missing term information")
}

// slogCore is a zapcore.Core writing to slog.
type slogCore struct {
	l      *slog.Logger
	min    zapcore.Level
	quiet  *atomic.Bool
	peers  *peerHealth
	fields []zapcore.Field
}

// Enabled reports whether lvl is at least the core's level, or the info
// level (for msgPeerActive, which Check picks out).
func (c *slogCore) Enabled(lvl zapcore.Level) bool { return lvl >= min(c.min, zapcore.InfoLevel) }

// With is the core with fields added to every entry.
func (c *slogCore) With(fields []zapcore.Field) zapcore.Core {
	return &slogCore{l: c.l, min: c.min, quiet: c.quiet, peers: c.peers, fields: append(slices.Clip(c.fields), fields...)}
}

// Check adds the core to ce when the entry's level is at least the core's,
// or the entry says a peer is back.
func (c *slogCore) Check(ent zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if ent.Level >= c.min || ent.Message == msgPeerActive && ent.Level >= zapcore.InfoLevel {
		return ce.AddCore(ent, c)
	}
	return ce
}

// Write logs the entry with its fields as slog attributes, in key order.
func (c *slogCore) Write(ent zapcore.Entry, fields []zapcore.Field) error {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range c.fields {
		f.AddTo(enc)
	}
	for _, f := range fields {
		f.AddTo(enc)
	}
	keys := make([]string, 0, len(enc.Fields))
	for k := range enc.Fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	attrs := make([]slog.Attr, 0, len(keys)+1)
	if ent.LoggerName != "" {
		attrs = append(attrs, slog.String("logger", ent.LoggerName))
	}
	for _, k := range keys {
		attrs = append(attrs, slog.Any(k, enc.Fields[k]))
	}
	lvl := slog.LevelWarn
	if ent.Level >= zapcore.ErrorLevel {
		lvl = slog.LevelError
	}
	if c.quiet != nil && c.quiet.Load() {
		lvl = slog.LevelDebug
	}
	if benign(ent.Message) || freshMemberStorageVersion(ent.Message, enc.Fields) {
		lvl = slog.LevelDebug
	}
	switch ent.Message {
	case msgProberUnhealthy:
		// Once per peer while it is down.
		if peer, _ := enc.Fields[fieldProberPeer].(string); c.peers != nil && !c.peers.unhealthy(peer, ent.Time) {
			lvl = slog.LevelDebug
		}
	case msgPeerActive:
		// Back after a report of it down; at first contact, nothing to say.
		lvl = slog.LevelDebug
		if peer, _ := enc.Fields[fieldActivePeer].(string); c.peers != nil && c.peers.active(peer) && (c.quiet == nil || !c.quiet.Load()) {
			lvl = slog.LevelInfo
		}
	}
	c.l.LogAttrs(context.Background(), lvl, "etcd: "+ent.Message, attrs...)
	return nil
}

// Sync has nothing to flush.
func (c *slogCore) Sync() error { return nil }
