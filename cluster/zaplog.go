package cluster

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// zapToSlog is a zap logger that hands etcd's log lines at warn level and
// above to Mayfly's slog logger, so an embedded member or client says
// nothing on stderr of its own.
// While quiet is set (the node is stopping), etcd's lines go at debug
// level: members and clients closing warn about every connection they
// drop.
func zapToSlog(l *slog.Logger, quiet *atomic.Bool) *zap.Logger {
	return zap.New(&slogCore{l: l, min: zapcore.WarnLevel, quiet: quiet})
}

// benign reports whether an etcd warning says nothing about Mayfly's use
// of it: the member serves gRPC and HTTP on its one client port, and its
// clients have no users (no authentication tokens, signed or not). Those
// go at debug level.
func benign(msg string) bool {
	return strings.HasPrefix(msg, "Running http and grpc server on single port") ||
		strings.HasPrefix(msg, "simple token is not cryptographically signed")
}

// slogCore is a zapcore.Core writing to slog.
type slogCore struct {
	l      *slog.Logger
	min    zapcore.Level
	quiet  *atomic.Bool
	fields []zapcore.Field
}

// Enabled reports whether lvl is at least the core's level.
func (c *slogCore) Enabled(lvl zapcore.Level) bool { return lvl >= c.min }

// With is the core with fields added to every entry.
func (c *slogCore) With(fields []zapcore.Field) zapcore.Core {
	return &slogCore{l: c.l, min: c.min, quiet: c.quiet, fields: append(slices.Clip(c.fields), fields...)}
}

// Check adds the core to ce when the entry's level is enabled.
func (c *slogCore) Check(ent zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(ent.Level) {
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
	if benign(ent.Message) {
		lvl = slog.LevelDebug
	}
	c.l.LogAttrs(context.Background(), lvl, "etcd: "+ent.Message, attrs...)
	return nil
}

// Sync has nothing to flush.
func (c *slogCore) Sync() error { return nil }
