package kv

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/mayflydb/mayfly/audit"
	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/internal/cbstats"
	"github.com/mayflydb/mayfly/internal/clusterconfig"
)

// Options configure a Server. A nil *Options means DefaultOptions(), which
// authenticates nobody: set Auth.
type Options struct {
	// Auth holds the users a connection authenticates as (SASL PLAIN). nil
	// refuses every login.
	Auth *auth.Store
	// Audit, if set, records failed logins (audit.ActionLoginFailed), as
	// the HTTP API does. The default value records nothing.
	Audit func(ctx context.Context, e audit.Event) error
	// Ports are the ports GET_CLUSTER_CONFIG lists. A zero KV port (over
	// TLS, KVSSL port) is filled in with the port of the listener a
	// connection came in on.
	// SDKs refuse a configuration without a management port: set Mgmt to
	// the HTTP API's.
	Ports clusterconfig.Ports
	// Topology, on a cluster node, lays a bucket's configuration out over
	// the cluster (clusterconfig.Bucket.WithTopology): every node, and
	// each partition's leader first. A write refused NOT_MY_VBUCKET
	// carries that configuration in its body, as Couchbase's does, so an
	// SDK sends it on to the leader. Asked for the bucket "" it gives the
	// cluster's nodes (Servers and Rev), which the configuration of a
	// connection that selected no bucket lists (clusterconfig.ClusterOf).
	// nil (or a nil Topology: the bucket is not placed yet) serves this
	// node alone.
	Topology func(ctx context.Context, bucket string) (*clusterconfig.Topology, error)
	// PagerStats, if set, adds the expiry pager's statistics to STAT's
	// (pager.Manager.Stats), as the HTTP API's stats carry them.
	PagerStats cbstats.PagerStats
	// MaxConns is the most connections open at once; more are closed at
	// once. The default value is 1024.
	MaxConns int
	// MaxBodyLen is the largest packet body (framing extras, extras, key
	// and value), in bytes; a larger packet is refused with E2BIG and its
	// connection closed. The default value is engine.MaxValueLen plus 64
	// KiB (bytes).
	MaxBodyLen int
	// IdleTimeout closes a connection that has sent nothing for this long
	// between packets (SDKs poll the configuration every few seconds, so
	// theirs never idle that long). The default value is 5m; a negative
	// value never closes one.
	IdleTimeout time.Duration
	// PacketTimeout closes a connection whose packet has begun to arrive
	// but not finished within this long: half a packet cannot hold a
	// connection slot. The default value is 30s; a negative value waits
	// for ever.
	PacketTimeout time.Duration
	// Logger receives connection-level log lines. The default value
	// discards them.
	Logger *slog.Logger
}

// Defaults of the timeouts.
const (
	// DefaultIdleTimeout is Options.IdleTimeout's default.
	DefaultIdleTimeout = 5 * time.Minute
	// DefaultPacketTimeout is Options.PacketTimeout's default.
	DefaultPacketTimeout = 30 * time.Second
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
	if o.MaxBodyLen == 0 {
		o.MaxBodyLen = engine.MaxValueLen + 64<<10
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.PacketTimeout == 0 {
		o.PacketTimeout = DefaultPacketTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
}

// Validate reports the first option out of range, naming it.
func (o *Options) Validate() error {
	switch {
	case o.MaxConns < 1:
		return fmt.Errorf("%w: MaxConns must be positive, got %d", ErrInvalidOptions, o.MaxConns)
	case o.MaxBodyLen < 1<<10:
		return fmt.Errorf("%w: MaxBodyLen must be at least 1024, got %d", ErrInvalidOptions, o.MaxBodyLen)
	}
	return nil
}
