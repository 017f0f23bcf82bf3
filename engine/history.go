package engine

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// ErrRollback is returned by CheckPosition when a change-feed position is not
// in the bucket's history: the bucket lost writes the consumer saw (a machine
// crash without fsync), its data was recreated or restored from a backup. The
// consumer must roll back; starting again from the beginning always works.
var ErrRollback = errors.New("engine: change-feed position not in the bucket's history")

// maxFailoverEntries caps the failover log, as Couchbase does.
const maxFailoverEntries = 25

// FailoverEntry is one history of a bucket's data: the UUID that names it and
// the high sequence number of each partition when it began. A new history
// begins when a bucket is created and each time it opens after a shutdown
// that was not clean, since writes that had not reached disk may be lost and
// their sequence numbers reused.
type FailoverEntry struct {
	// UUID names the history; it is never 0.
	UUID uint64 `json:"uuid"`
	// Seqs is each partition's high sequence number when the history began
	// (nil when they were all 0).
	Seqs []uint64 `json:"seqs,omitempty"`
	// CAS is the highest CAS the bucket had handed out, or committed
	// after a shutdown that was not clean, when the history began: every
	// change of the older histories that a change-feed position at or
	// below it covers was kept (CheckCASPosition). 0 in an entry from
	// before it was recorded.
	CAS uint64 `json:"cas,omitempty"`
}

// UUID returns the UUID of the bucket's current history: it changes when the
// bucket's data is recreated, and when a new history begins (see
// FailoverEntry).
func (b *Bucket) UUID() uint64 {
	b.histMu.Lock()
	defer b.histMu.Unlock()
	return b.history[0].UUID
}

// FailoverLog returns the bucket's histories, newest first, as Couchbase lists
// a vBucket's failover log.
func (b *Bucket) FailoverLog() []FailoverEntry {
	b.histMu.Lock()
	defer b.histMu.Unlock()
	out := make([]FailoverEntry, len(b.history))
	for i, e := range b.history {
		out[i] = FailoverEntry{UUID: e.UUID, Seqs: slices.Clone(e.Seqs), CAS: e.CAS}
	}
	return out
}

// CheckPosition reports whether a change-feed consumer that has seen every
// change up to seqs in the history named uuid can go on from there: nil when
// the bucket's history still holds that position, an error wrapping
// ErrRollback when it does not (unknown history, or sequence numbers past
// where that history ended or past what the bucket holds). A consumer that
// has seen nothing (every sequence number 0) can always go on.
func (b *Bucket) CheckPosition(uuid uint64, seqs []uint64) error {
	parts, _, err := b.RollbackPartitions(uuid, seqs)
	if err != nil {
		return err
	}
	if len(parts) > 0 {
		return parts[0].err(uuid)
	}
	return nil
}

// PartitionRollback is one partition a change-feed consumer must roll back
// (see Bucket.RollbackPartitions): it has seen changes up to Seq there, and
// the bucket's history holds the partition only up to Held.
type PartitionRollback struct {
	// Partition is the partition rolled back.
	Partition int
	// Seq is where the consumer was in it; Held, where the history is.
	Seq, Held uint64
}

func (r PartitionRollback) err(uuid uint64) error {
	return fmt.Errorf("%w: partition %d at sequence number %d, history %d holds %d", ErrRollback, r.Partition, r.Seq, uuid, r.Held)
}

// RollbackPartitions tells a change-feed consumer that has seen every
// change up to seqs in the history named uuid which partitions it must roll
// back to go on in the bucket's current history, named now: those where it
// has seen more than the history holds (a partition whose copy was dropped,
// DropPartition, or writes lost to a crash), and which it must then forget
// whole and read again from sequence number 0. None when the position is
// still held. It fails with an error wrapping ErrRollback when only
// starting over from the beginning works (a history the failover log no
// longer names, a vector of another length).
//
// What a history holds of a partition is the least of the high sequence
// numbers every later history began at, and the partition's high sequence
// number (read before now: a partition dropped in between is held to its
// old end here, and the history its drop begins, after now, tells the
// consumer again). A consumer that rolls back what this returns and then
// follows now sees every history that begins later as a change.
func (b *Bucket) RollbackPartitions(uuid uint64, seqs []uint64) (parts []PartitionRollback, now uint64, err error) {
	limit := b.HighSeqnos() // the current history's own end; before now
	b.histMu.Lock()
	now = b.history[0].UUID
	i := slices.IndexFunc(b.history, func(e FailoverEntry) bool { return e.UUID == uuid })
	for _, e := range b.history[:max(i, 0)] {
		for p := range limit {
			var s uint64
			if e.Seqs != nil {
				s = e.Seqs[p]
			}
			limit[p] = min(limit[p], s)
		}
	}
	b.histMu.Unlock()
	if seqs != nil && len(seqs) != len(b.parts) {
		return nil, now, fmt.Errorf("%w: sequence vector has %d partitions, the bucket %d", ErrRollback, len(seqs), len(b.parts))
	}
	if !slices.ContainsFunc(seqs, func(s uint64) bool { return s != 0 }) {
		return nil, now, nil
	}
	if i < 0 {
		return nil, now, fmt.Errorf("%w: history %d is not in the failover log", ErrRollback, uuid)
	}
	for p, s := range seqs {
		if s > limit[p] {
			parts = append(parts, PartitionRollback{Partition: p, Seq: s, Held: limit[p]})
		}
	}
	return parts, now, nil
}

// newUUID returns a random, non-zero history UUID.
func newUUID() uint64 {
	var buf [8]byte
	for {
		rand.Read(buf[:])
		if u := binary.BigEndian.Uint64(buf[:]); u != 0 {
			return u
		}
	}
}

// beginHistory starts a new history at the bucket's current high sequence
// numbers and CAS (FailoverEntry.CAS), in front of log (which it may
// change), capped at maxFailoverEntries.
func beginHistory(log []FailoverEntry, high []uint64, cas uint64) []FailoverEntry {
	e := FailoverEntry{UUID: newUUID(), CAS: cas}
	if slices.ContainsFunc(high, func(s uint64) bool { return s != 0 }) {
		e.Seqs = slices.Clone(high)
	}
	log = append([]FailoverEntry{e}, log...)
	if len(log) > maxFailoverEntries {
		log = log[:maxFailoverEntries]
	}
	return log
}

func encodeHistory(log []FailoverEntry) ([]byte, error) { return json.Marshal(log) }

func decodeHistory(v []byte) ([]FailoverEntry, error) {
	var log []FailoverEntry
	if err := json.Unmarshal(v, &log); err != nil {
		return nil, fmt.Errorf("engine: corrupt failover log: %w", err)
	}
	return log, nil
}
