package kv

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/couchbase/gocbcore/v10/memd"

	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/engine"
)

// copyCommand reports whether pkt is answered from this node's copy of a
// partition, whether it leads the partition or not: a replica read
// (GET_REPLICA, or a sub-document lookup flagged as one: replicaRead)
// and the legacy durability's poll (OBSERVE_SEQNO). None is sent to the
// leader alone nor waits for the read barrier: a replica read may be
// stale, as Couchbase's is, and an observer asks about this copy.
func copyCommand(pkt *memd.Packet) bool {
	return pkt.Command == memd.CmdGetReplica || pkt.Command == memd.CmdObserveSeqNo || replicaRead(pkt)
}

// replicaRead reports whether pkt is a sub-document lookup with the
// replica-read document flag (Couchbase 7.6's, which an SDK's
// LookupInAnyReplica and LookupInAllReplicas set on the lookups they
// send to a key's replicas): SUBDOC_MULTI_LOOKUP whose one byte of extras
// is its document flags, or a single-path lookup whose fourth byte of
// extras is.
func replicaRead(pkt *memd.Packet) bool {
	var flags memd.SubdocDocFlag
	switch {
	case pkt.Command == memd.CmdSubDocMultiLookup && len(pkt.Extras) == 1:
		flags = memd.SubdocDocFlag(pkt.Extras[0])
	case (pkt.Command == memd.CmdSubDocGet || pkt.Command == memd.CmdSubDocExists || pkt.Command == memd.CmdSubDocGetCount) && len(pkt.Extras) == 4:
		flags = memd.SubdocDocFlag(pkt.Extras[3])
	}
	return flags&memd.SubdocDocFlagReplicaRead != 0
}

// copyRole is what this node holds of a partition.
type copyRole int

const (
	// noCopy: this node holds no copy of the partition.
	noCopy copyRole = iota
	// activeCopy: this node leads the partition (on a single node, every
	// partition).
	activeCopy
	// replicaCopy: this node holds a copy another node leads.
	replicaCopy
)

// roleOf says what this node holds of partition part of the selected
// bucket, from the configuration's layout (Options.Topology): the leader
// is the first server of the partition's vBucketMap row, its replicas the
// others, so an SDK's replica index i names the row's server i. Without
// a layout (a single node, or a bucket not placed yet) the node holds
// every partition, active: single is then true.
func (c *conn) roleOf(ctx context.Context, part int) (role copyRole, single bool) {
	if c.s.opts.Topology == nil {
		return activeCopy, true
	}
	t, err := c.s.opts.Topology(ctx, c.bucket.Name())
	if err != nil || t == nil {
		if c.bucket.Replicated() {
			return noCopy, false // placed, but the layout cannot be read now
		}
		return activeCopy, true
	}
	self := -1
	for i, s := range t.Servers {
		if s.ThisNode {
			self = i
		}
	}
	if self < 0 || part >= len(t.Map) {
		return noCopy, false
	}
	for i, n := range t.Map[part] {
		if n != self {
			continue
		}
		if i == 0 {
			return activeCopy, false
		}
		return replicaCopy, false
	}
	return noCopy, false
}

// routeCopy checks a copyCommand (the bucket selected, the user
// allowed): the vBucket must be the bucket's. It answers a refusal and
// returns nil, or returns the command to run.
func (c *conn) routeCopy(pkt *memd.Packet, op kvOp) *kvOp {
	if n := c.bucket.NumPartitions(); int(pkt.Vbucket) >= n {
		c.failErr(pkt, fmt.Errorf("%w: vBucket %d: bucket %q has vBuckets 0 to %d", engine.ErrNotMyVBucket, pkt.Vbucket, c.bucket.Name(), n-1))
		return nil
	}
	return &op
}

// getReplica runs GET_REPLICA on a node holding a replica of the key's
// partition: this node's copy of the document (value, flags, CAS), as
// replicaDoc reads it. A single node (no replicas) answers
// UNKNOWN_COMMAND, as before: an SDK reads its active copy instead.
func (c *conn) getReplica(ctx context.Context, pkt *memd.Packet) {
	d, err := c.replicaDoc(ctx, pkt, "GET_REPLICA")
	if errors.Is(err, errNoReplicas) {
		c.fail(pkt, memd.StatusUnknownCommand, "GET_REPLICA: this node has no replicas (a single node); read the active copy")
		return
	}
	if err != nil {
		c.failErr(pkt, err)
		return
	}
	c.reply(pkt, memd.StatusSuccess, flagsExtras(d), nil, d.Value, d.CAS, c.datatype(d))
}

// errNoReplicas says a replica read reached a single node, which has no
// replicas (replicaDoc's error wraps it with engine.ErrNotMyVBucket).
var errNoReplicas = errors.New("this node has no replicas (a single node); read the active copy")

// replicaDoc reads a replica read's document (GET_REPLICA's, or a
// lookup's with the replica-read flag, named what) from this node's
// replica of the key's partition, which may lag the leader's, without
// side effects: an expired document is not found and left for its
// leader to delete; a lock, held on the leader, does not show (the CAS is
// the version's). The partition's leader refuses it NOT_MY_VBUCKET, as
// Couchbase's active vBucket does, and so does a node holding no copy,
// and a single node, which has no replicas.
func (c *conn) replicaDoc(ctx context.Context, pkt *memd.Packet, what string) (*engine.Document, error) {
	part := c.bucket.PartitionOf(string(pkt.Key))
	role, single := c.roleOf(ctx, part)
	if role == replicaCopy && c.bucket.Serves(ctx, string(pkt.Key)) == nil {
		role = activeCopy // it leads the partition since the layout was read
	}
	switch {
	case single:
		return nil, fmt.Errorf("%w: %s: %w", engine.ErrNotMyVBucket, what, errNoReplicas)
	case role == activeCopy:
		return nil, fmt.Errorf("%w: this node leads partition %d: %s is answered by its replicas", engine.ErrNotMyVBucket, part, what)
	case role == noCopy:
		return nil, fmt.Errorf("%w: this node holds no replica of partition %d", engine.ErrNotMyVBucket, part)
	}
	coll, err := c.collection(pkt)
	if err != nil {
		return nil, err
	}
	return coll.Peek(string(pkt.Key))
}

// lookupDoc is the document a sub-document lookup (named what) reads:
// this node's replica's when pkt carries the replica-read flag
// (replicaDoc), else the collection's, as the leader reads it.
func (c *conn) lookupDoc(ctx context.Context, pkt *memd.Packet, what string) (*engine.Document, error) {
	if replicaRead(pkt) {
		return c.replicaDoc(ctx, pkt, what)
	}
	coll, err := c.collection(pkt)
	if err != nil {
		return nil, err
	}
	return coll.Get(ctx, string(pkt.Key))
}

// lookupCAS is the CAS a sub-document lookup of d (lookupDoc's) answers
// with: all ones while d is locked, as a get answers (shownCAS; Couchbase's
// lookups read through its get, which hides a locked document's CAS). A
// replica copy knows no lock (the leader holds it).
func (c *conn) lookupCAS(pkt *memd.Packet, d *engine.Document) uint64 {
	coll, err := c.collection(pkt)
	if err != nil {
		return d.CAS
	}
	return shownCAS(coll, d)
}

// Lengths of OBSERVE_SEQNO's answers: format 0, and format 1 (the
// history asked about was replaced: its UUID and last sequence number
// follow).
const (
	observeLen         = 1 + 2 + 8 + 8 + 8
	observeFailoverLen = observeLen + 8 + 8
)

// observeSeqNo runs OBSERVE_SEQNO (gocb's legacy durability, PersistTo
// and ReplicateTo, polls it on the partition's leader and each replica):
// the body is the vBucket UUID of the client's mutation token; the answer
// is this copy's UUID, its persisted and its current sequence numbers
// (format 0). A partition's sequence numbers are its replication log's
// indexes, the same on every copy, so a mutation token's sequence number
// from the leader compares with any copy's; the UUID names this node's
// history of the bucket (each node has its own). A UUID that names an
// older history of this node is answered in format 1, with where that
// history ended. A node holding no copy of the partition answers
// NOT_MY_VBUCKET. A user who may read or write the bucket's documents may
// ask (a writer polls its writes' durability).
func (c *conn) observeSeqNo(ctx context.Context, pkt *memd.Packet) {
	// A writer polls its own writes' durability: reading or writing the
	// bucket's documents allows it.
	if !c.user.Allows(auth.Permission{Action: auth.DataRead, Bucket: c.bucket.Name()}) &&
		!c.user.Allows(auth.Permission{Action: auth.DataWrite, Bucket: c.bucket.Name()}) {
		c.fail(pkt, memd.StatusAccessError, "no access: "+auth.Permission{Action: auth.DataRead, Bucket: c.bucket.Name()}.String()+" or "+auth.Permission{Action: auth.DataWrite, Bucket: c.bucket.Name()}.String()+" is needed")
		return
	}
	if len(pkt.Value) != 8 || len(pkt.Key) != 0 || len(pkt.Extras) != 0 {
		c.fail(pkt, memd.StatusInvalidArgs, "OBSERVE_SEQNO: the value must be the vBucket UUID (8 bytes), with no key or extras")
		return
	}
	part := int(pkt.Vbucket)
	if role, _ := c.roleOf(ctx, part); role == noCopy {
		c.failErr(pkt, fmt.Errorf("%w: this node holds no copy of partition %d", engine.ErrNotMyVBucket, part))
		return
	}
	current, persisted, err := c.bucket.PartitionSeqnos(part)
	if err != nil {
		c.failErr(pkt, err)
		return
	}
	asked := binary.BigEndian.Uint64(pkt.Value)
	hist := c.bucket.FailoverLog() // newest first
	b := make([]byte, 0, observeFailoverLen)
	format := byte(0)
	var oldEnd uint64
	for i := 1; i < len(hist); i++ {
		if hist[i].UUID == asked && asked != hist[0].UUID {
			// History i ended where history i-1 began.
			format = 1
			if seqs := hist[i-1].Seqs; part < len(seqs) {
				oldEnd = seqs[part]
			}
			break
		}
	}
	b = append(b, format)
	b = binary.BigEndian.AppendUint16(b, uint16(part))
	b = binary.BigEndian.AppendUint64(b, hist[0].UUID)
	b = binary.BigEndian.AppendUint64(b, persisted)
	b = binary.BigEndian.AppendUint64(b, current)
	if format == 1 {
		b = binary.BigEndian.AppendUint64(b, asked)
		b = binary.BigEndian.AppendUint64(b, oldEnd)
	}
	c.reply(pkt, memd.StatusSuccess, nil, nil, b, 0, 0)
}
