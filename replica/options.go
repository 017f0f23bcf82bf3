package replica

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Default timing and sizes (Options documents each).
const (
	DefaultTickInterval    = 100 * time.Millisecond
	DefaultElectionTicks   = 10
	DefaultHeartbeatTicks  = 1
	DefaultSnapshotEntries = 10000
	DefaultKeepEntries     = 5000
	DefaultMaxSizePerMsg   = 1 << 20
	DefaultMaxInflightMsgs = 256
	DefaultSendQueue       = 8192
)

// Options configures a Host. Open copies them and fills zero fields with
// defaults.
type Options struct {
	// Dir is the store's directory, <data>/cluster/raft for a node.
	Dir string
	// Node is this node's name, as in the peer list and partition map.
	Node string
	// Listen is the address the transport listens on: the node's cluster
	// port P. ":0" style addresses pick a free port (Host.Addr tells it).
	Listen string
	// AllowRemote lets Listen be beyond loopback. Without TLS the
	// transport has no authentication: whoever reaches it can inject
	// Raft messages (step 1's --cluster-allow-remote rule).
	AllowRemote bool
	// TLS, when set, makes every connection of the transport mutual TLS
	// 1.3 (clustertls.Creds.Config: this node's certificate, the
	// cluster's CA as RootCAs and ClientCAs): a connection is kept only
	// when the peer's certificate chains to the CA and names
	// (clustertls.NodeName) the node it speaks for, the node dialled or
	// the sender its hello claims. Nil: plain TCP. Every node of a
	// cluster must have it, or none.
	TLS *tls.Config
	// Resolver maps node names to their cluster addresses.
	Resolver Resolver
	// Peers names the cluster's nodes (serve's --peers), this one among
	// them or not. A message goes to a node by its name, and the Host
	// knows a name from these and from the voters it is told of
	// (AddGroup, JoinGroup, SetTarget): a group restarted from the store
	// runs the configuration it stored, which may hold nodes the partition
	// map no longer names (a lowered replicaNumber's shed copies whose
	// removal has not committed yet), and without their names it could
	// send them nothing, not even the votes and acknowledgements that
	// removal needs. Nil: only the names told.
	Peers []string
	// TickInterval is the Raft tick of every group. The default value is
	// 100 ms.
	TickInterval time.Duration
	// ElectionTicks is the election timeout in ticks (raft randomises it
	// between 1x and 2x). The default value is 10 (1 s to 2 s).
	ElectionTicks int
	// HeartbeatTicks is the leader's heartbeat interval in ticks. The
	// default value is 1 (100 ms).
	HeartbeatTicks int
	// SnapshotEntries is how many entries a group applies between two
	// snapshots of its state machine (after which its log is compacted).
	// The default value is 10000.
	SnapshotEntries uint64
	// KeepEntries is how many applied entries stay in the log behind a
	// snapshot, so a replica a little behind catches up from the log
	// rather than a snapshot. The default value is 5000.
	KeepEntries uint64
	// MaxSizePerMsg bounds the entries of one append message (bytes). The
	// default value is 1 MiB.
	MaxSizePerMsg uint64
	// MaxInflightMsgs bounds a leader's unacknowledged append messages per
	// follower. The default value is 256.
	MaxInflightMsgs int
	// SendQueue bounds the messages waiting for one peer's connection.
	// Queued heartbeats and heartbeat responses are replaced by their
	// group's newer ones and written after the other messages; at a full
	// queue another message evicts the oldest heartbeat or response, and
	// only when none is left is it dropped (Raft retransmits) and the
	// peer reported unreachable. The default value is 8192.
	SendQueue int
	// Logger receives the Host's and raft's messages; nil discards them.
	Logger *slog.Logger
	// FaultCut is a fault-injection hook for chaos testing only (the
	// mayfly binary sets it only when built with -tags chaos): when it
	// reports true for a peer's NodeID, frames to and from that peer are
	// dropped while connections stay open, a network partition of the
	// Raft traffic. Called for every frame; nil (always, in production)
	// drops nothing.
	FaultCut func(peer uint64) bool

	test struct {
		noSync    bool   // batches are not fsync'd (tests of logic only)
		noQuiesce bool   // every group ticks always (the code before quiescing, to compare)
		fs        vfs.FS // the store's file system (a crashable one in crash tests)
		// cut, if set, says that frames to and from a peer are dropped
		// (its connections stay open: a network partition that breaks
		// nothing, the case a closed connection would not show).
		cut func(peer uint64) bool
		// backoff, if set, is the pause after every failed dial, in
		// place of the transport's growing one.
		backoff time.Duration
		// beforeWrite, if set, is called by a peer's sender with the
		// number of frames it is about to write, and beforeStep by an
		// inbound connection's stepper with the number it is about to
		// step (a test's starved node sleeps in them).
		beforeWrite, beforeStep func(frames int)
		// fateWait, if set, replaces fateElections election timeouts as
		// how long a proposal waits for its fate once its group's leader
		// changed, and a forwarded proposal is held back (Host.fateWait):
		// for tests whose writes must learn their fate at any load.
		fateWait time.Duration
	}
}

// EnsureDefaults fills the zero fields with their default values.
func (o *Options) EnsureDefaults() {
	if o.TickInterval == 0 {
		o.TickInterval = DefaultTickInterval
	}
	if o.ElectionTicks == 0 {
		o.ElectionTicks = DefaultElectionTicks
	}
	if o.HeartbeatTicks == 0 {
		o.HeartbeatTicks = DefaultHeartbeatTicks
	}
	if o.SnapshotEntries == 0 {
		o.SnapshotEntries = DefaultSnapshotEntries
	}
	if o.KeepEntries == 0 {
		o.KeepEntries = DefaultKeepEntries
	}
	if o.MaxSizePerMsg == 0 {
		o.MaxSizePerMsg = DefaultMaxSizePerMsg
	}
	if o.MaxInflightMsgs == 0 {
		o.MaxInflightMsgs = DefaultMaxInflightMsgs
	}
	if o.SendQueue == 0 {
		o.SendQueue = DefaultSendQueue
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.test.cut == nil {
		o.test.cut = o.FaultCut // the one frame check serves both
	}
}

// Validate checks the options (after EnsureDefaults).
func (o *Options) Validate() error {
	switch {
	case o.Dir == "":
		return fmt.Errorf("%w: no store directory", ErrBadOptions)
	case !validName(o.Node):
		return fmt.Errorf("%w: node name %q", ErrBadOptions, o.Node)
	case o.Listen == "":
		return fmt.Errorf("%w: no listen address", ErrBadOptions)
	case o.Resolver == nil:
		return fmt.Errorf("%w: no resolver", ErrBadOptions)
	case o.TickInterval <= 0 || o.HeartbeatTicks <= 0 || o.ElectionTicks <= o.HeartbeatTicks:
		return fmt.Errorf("%w: the tick must be positive and the election timeout longer than the heartbeat", ErrBadOptions)
	}
	_, err := o.names()
	return err
}

// names returns the nodes the Host knows the names of from the start,
// this one and Peers, by Raft ID; two names of one ID are refused.
func (o *Options) names() (map[uint64]string, error) {
	names := map[uint64]string{NodeID(o.Node): o.Node}
	for _, p := range o.Peers {
		if !validName(p) {
			return nil, fmt.Errorf("%w: peer name %q", ErrBadOptions, p)
		}
		nid := NodeID(p)
		if other, ok := names[nid]; ok && other != p {
			return nil, fmt.Errorf("%w: nodes %q and %q have the same Raft ID", ErrBadOptions, other, p)
		}
		names[nid] = p
	}
	return names, nil
}

func validName(s string) bool { return s != "" && len(s) <= 64 }
