package replica

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// The store's keys, all of one group under 'g' + group (8 bytes, big
// endian) + a kind byte:
//
//	e + index (8 bytes)   a log entry (raftpb.Entry)
//	h                     the HardState
//	s                     the latest snapshot (raftpb.Snapshot, with data)
//	a                     the applied index (8 bytes)
//	c + index (8 bytes)   the ConfState once the conf change at index was
//	                      applied (raftpb.ConfState), those after the
//	                      snapshot's index
//	m + key               the state machine's own keys (Writer)
const (
	kindEntry    = 'e'
	kindHard     = 'h'
	kindSnap     = 's'
	kindApplied  = 'a'
	kindConf     = 'c'
	kindMachine  = 'm'
	groupKeyLen  = 1 + 8
	entryKeyLen  = groupKeyLen + 1 + 8
	keyPrefixTag = 'g'
)

func groupKey(g GroupID, kind byte, extra int) []byte {
	k := make([]byte, groupKeyLen+1, groupKeyLen+1+extra)
	k[0] = keyPrefixTag
	binary.BigEndian.PutUint64(k[1:], uint64(g))
	k[groupKeyLen] = kind
	return k
}

func entryKey(g GroupID, index uint64) []byte {
	return binary.BigEndian.AppendUint64(groupKey(g, kindEntry, 8), index)
}

func machineKey(g GroupID, key []byte) []byte {
	return append(groupKey(g, kindMachine, len(key)), key...)
}

func confKey(g GroupID, index uint64) []byte {
	return binary.BigEndian.AppendUint64(groupKey(g, kindConf, 8), index)
}

// groupEnd is the first key after every key of group g.
func groupEnd(g GroupID) []byte {
	if g == ^GroupID(0) {
		return []byte{keyPrefixTag + 1}
	}
	return groupKey(g+1, 0, 0)[:groupKeyLen]
}

// kindEnd is the first key after every key of the group's kind.
func kindEnd(g GroupID, kind byte) []byte { return groupKey(g, kind+1, 0) }

// store is the Host's pebble database.
type store struct {
	db   *pebble.DB
	sync *pebble.WriteOptions
}

func openStore(dir string, log *slog.Logger, noSync bool, fs vfs.FS) (*store, error) {
	db, err := pebble.Open(dir, &pebble.Options{
		FS:                 fs,
		FormatMajorVersion: pebble.FormatNewest,
		Logger:             pebbleLogger{log},
	})
	if err != nil {
		return nil, fmt.Errorf("replica: open store %s: %w", dir, err)
	}
	s := &store{db: db, sync: pebble.Sync}
	if noSync {
		s.sync = pebble.NoSync
	}
	return s, nil
}

// groupState is what the store holds of one group.
type groupState struct {
	snap    *pb.Snapshot
	hard    *pb.HardState
	ents    []*pb.Entry
	applied uint64
	confs   []confAt // the ConfStates applied after the snapshot's index, in index order
}

// confAt is the ConfState of a group once the conf change at index was
// applied.
type confAt struct {
	index uint64
	cs    *pb.ConfState
}

// confAsOf returns the ConfState in force once index was applied: the
// latest stored one at or below index, else the snapshot's.
func (st groupState) confAsOf(index uint64) *pb.ConfState {
	cs := st.snap.GetMetadata().GetConfState()
	for _, c := range st.confs {
		if c.index <= index {
			cs = c.cs
		}
	}
	return cs
}

// load reads a group's snapshot, HardState, log and applied index; found
// is false for a group the store has never held.
func (s *store) load(g GroupID) (st groupState, found bool, err error) {
	if st.snap, found, err = getProto[pb.Snapshot](s.db, groupKey(g, kindSnap, 0)); err != nil {
		return st, found, err
	}
	hard, hardFound, err := getProto[pb.HardState](s.db, groupKey(g, kindHard, 0))
	if err != nil {
		return st, found, err
	}
	st.hard = hard
	if !found {
		if !hardFound {
			return st, false, nil
		}
		// A group joined empty (Host.JoinGroup) that has voted or
		// followed but received no snapshot yet: its HardState counts.
		st.snap = &pb.Snapshot{Metadata: &pb.SnapshotMetadata{ConfState: &pb.ConfState{}}}
	}
	v, closer, err := s.db.Get(groupKey(g, kindApplied, 0))
	switch {
	case err == nil:
		if len(v) == 8 {
			st.applied = binary.BigEndian.Uint64(v)
		}
		closer.Close()
	case !errors.Is(err, pebble.ErrNotFound):
		return st, true, fmt.Errorf("replica: group %d: %w", g, err)
	}
	if st.confs, err = s.loadConfs(g); err != nil {
		return st, true, err
	}
	from := st.snap.GetMetadata().GetIndex() + 1
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: entryKey(g, from), UpperBound: kindEnd(g, kindEntry)})
	if err != nil {
		return st, true, fmt.Errorf("replica: group %d: %w", g, err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		e := &pb.Entry{}
		if err := proto.Unmarshal(it.Value(), e); err != nil {
			return st, true, fmt.Errorf("replica: group %d: entry %x: %w", g, it.Key(), err)
		}
		if want := from + uint64(len(st.ents)); e.GetIndex() != want {
			return st, true, fmt.Errorf("replica: group %d: log has entry %d where %d belongs", g, e.GetIndex(), want)
		}
		st.ents = append(st.ents, e)
	}
	return st, true, it.Error()
}

// holds reports whether the store holds a snapshot or a HardState of group
// g (what load finds a group by), without reading the rest.
func (s *store) holds(g GroupID) (bool, error) {
	for _, kind := range []byte{kindSnap, kindHard} {
		_, closer, err := s.db.Get(groupKey(g, kind, 0))
		if err == nil {
			closer.Close()
			return true, nil
		}
		if !errors.Is(err, pebble.ErrNotFound) {
			return false, fmt.Errorf("replica: group %d: %w", g, err)
		}
	}
	return false, nil
}

// loadConfs reads a group's stored ConfStates, in index order.
func (s *store) loadConfs(g GroupID) ([]confAt, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: confKey(g, 0), UpperBound: kindEnd(g, kindConf)})
	if err != nil {
		return nil, fmt.Errorf("replica: group %d: %w", g, err)
	}
	defer it.Close()
	var out []confAt
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) != groupKeyLen+1+8 {
			return nil, fmt.Errorf("replica: group %d: bad conf key %x", g, k)
		}
		cs := &pb.ConfState{}
		if err := proto.Unmarshal(it.Value(), cs); err != nil {
			return nil, fmt.Errorf("replica: group %d: conf %x: %w", g, k, err)
		}
		out = append(out, confAt{index: binary.BigEndian.Uint64(k[groupKeyLen+1:]), cs: cs})
	}
	return out, it.Error()
}

// putConf stores the ConfState applied at index.
func putConf(b *pebble.Batch, g GroupID, index uint64, cs *pb.ConfState) error {
	return setProto(b, confKey(g, index), cs)
}

// pruneConfs drops the stored ConfStates up to index (inclusive): a
// snapshot at index holds the one in force there.
func pruneConfs(b *pebble.Batch, g GroupID, index uint64) error {
	return b.DeleteRange(confKey(g, 0), confKey(g, index+1), nil)
}

func getProto[T any, P interface {
	*T
	proto.Message
}](db *pebble.DB, key []byte) (P, bool, error) {
	v, closer, err := db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("replica: reading %x: %w", key, err)
	}
	defer closer.Close()
	m := P(new(T))
	if err := proto.Unmarshal(v, m); err != nil {
		return nil, false, fmt.Errorf("replica: decoding %x: %w", key, err)
	}
	return m, true, nil
}

func setProto(b *pebble.Batch, key []byte, m proto.Message) error {
	v, err := proto.Marshal(m)
	if err != nil {
		return err
	}
	return b.Set(key, v, nil)
}

// appendEntries writes ents (consecutive) and drops any entry the store
// held beyond the last of them (a conflicting suffix raft overwrote).
func appendEntries(b *pebble.Batch, g GroupID, ents []*pb.Entry, lastStored uint64) error {
	for _, e := range ents {
		if err := setProto(b, entryKey(g, e.GetIndex()), e); err != nil {
			return err
		}
	}
	if last := ents[len(ents)-1].GetIndex(); lastStored > last {
		return b.DeleteRange(entryKey(g, last+1), kindEnd(g, kindEntry), nil)
	}
	return nil
}

// putSnapshot writes a snapshot and drops the log entries it covers (all
// of them when whole is set: a received snapshot replaces the log).
func putSnapshot(b *pebble.Batch, g GroupID, snap *pb.Snapshot, whole bool) error {
	if err := setProto(b, groupKey(g, kindSnap, 0), snap); err != nil {
		return err
	}
	end := entryKey(g, snap.GetMetadata().GetIndex()+1)
	if whole {
		end = kindEnd(g, kindEntry)
	}
	return b.DeleteRange(entryKey(g, 0), end, nil)
}

func putApplied(b *pebble.Batch, g GroupID, index uint64) error {
	return b.Set(groupKey(g, kindApplied, 0), binary.BigEndian.AppendUint64(nil, index), nil)
}

// compactLog drops the log entries up to index (inclusive).
func compactLog(b *pebble.Batch, g GroupID, index uint64) error {
	return b.DeleteRange(entryKey(g, 0), entryKey(g, index+1), nil)
}

// scanMachine calls fn for each of a group's state-machine keys, in key
// order; the slices are valid during the call only.
func (s *store) scanMachine(g GroupID, fn func(key, value []byte) error) error {
	lo := groupKey(g, kindMachine, 0)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: kindEnd(g, kindMachine)})
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		if err := fn(it.Key()[len(lo):], it.Value()); err != nil {
			return err
		}
	}
	return it.Error()
}

// machineWriter is the Writer of one group in one round's batch.
type machineWriter struct {
	b *pebble.Batch
	g GroupID
}

func (w machineWriter) Set(key, value []byte) error {
	return w.b.Set(machineKey(w.g, key), value, nil)
}

func (w machineWriter) Delete(key []byte) error { return w.b.Delete(machineKey(w.g, key), nil) }

func (w machineWriter) Clear() error {
	return w.b.DeleteRange(groupKey(w.g, kindMachine, 0), kindEnd(w.g, kindMachine), nil)
}

// pebbleLogger sends pebble's messages to the Host's logger.
type pebbleLogger struct{ log *slog.Logger }

func (l pebbleLogger) Infof(format string, args ...any) {
	l.log.Debug(fmt.Sprintf(format, args...), "component", "pebble")
}

func (l pebbleLogger) Errorf(format string, args ...any) {
	l.log.Error(fmt.Sprintf(format, args...), "component", "pebble")
}

func (l pebbleLogger) Fatalf(format string, args ...any) {
	l.log.Error(fmt.Sprintf(format, args...), "component", "pebble")
	panic(fmt.Sprintf(format, args...))
}
