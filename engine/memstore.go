package engine

import (
	"fmt"
	"iter"
	"slices"
	"sync"
	"sync/atomic"
)

// memStorage is the store of a bucket that keeps nothing on disk (ephemeral
// and memcached buckets). It keeps no documents, which live only in the
// partitions, and no expiry entries; it keeps the partitions' sequence
// numbers, the CAS and the metadata, so that the engine runs the same code
// for every bucket. Its commits cannot fail and take no lock (writers commit
// inline, each under its partition's lock, and touch only that partition's
// counters), and it loses everything when the
// process ends: each open is a new, empty store.
type memStorage struct {
	parts []memPartition

	mu        sync.Mutex // guards the metadata below
	consumers []string
	history   []FailoverEntry
	clean     bool
	sys       map[string][]byte
	maxCAS    uint64 // the highest CAS raiseCAS recorded
}

// memPartition is what a memStorage keeps of one partition. Its writers
// hold the partition's lock, so its counters are rarely contended (a
// bucket-wide CAS would be, by every writer).
type memPartition struct {
	seq atomic.Uint64 // highest sequence number committed
	cas atomic.Uint64 // highest CAS committed
}

// newMemStorage returns an empty store for a bucket of n partitions.
func newMemStorage(n int) *memStorage {
	return &memStorage{parts: make([]memPartition, n), sys: make(map[string][]byte)}
}

func (s *memStorage) durable() bool { return false }

func (s *memStorage) encode(record) []byte { return nil }

func (s *memStorage) commit(recs []record) error {
	for _, r := range recs {
		if err := s.commitOne(r); err != nil {
			return err
		}
	}
	return nil
}

func (s *memStorage) commitOne(r record) error {
	if int(r.part) >= len(s.parts) {
		return fmt.Errorf("engine: partition %d of %d", r.part, len(s.parts))
	}
	p := &s.parts[r.part]
	if r.countsSeq() {
		atomicMax(&p.seq, r.seq)
	}
	atomicMax(&p.cas, r.cas)
	return nil
}

// atomicMax raises v to at least x.
func atomicMax(v *atomic.Uint64, x uint64) {
	for {
		cur := v.Load()
		if cur >= x || v.CompareAndSwap(cur, x) {
			return
		}
	}
}

func (s *memStorage) probe() error { return nil }

func (s *memStorage) doc(k docKey) (*Document, error) {
	return nil, fmt.Errorf("%w: %s (a memory-only bucket keeps documents in its partitions only)", ErrNotFound, k.key)
}

// docs finds none: the store keeps no documents.
func (s *memStorage) docs(keys []docKey) ([]*Document, error) {
	return make([]*Document, len(keys)), nil
}

func (s *memStorage) scan(func(*Document) error) error { return nil }

func (s *memStorage) scanKeys(func(docKey) error) error { return nil }

func (s *memStorage) docsAfter(_ docKey, _ bool, _ int, out []*Document) ([]*Document, error) {
	return out, nil
}

// keys yields nothing: the store keeps no documents (see Collection.List
// for how a memory-only bucket lists its keys).
func (s *memStorage) keys(CollectionID, keyRange) iter.Seq2[string, error] {
	return func(func(string, error) bool) {}
}

func (s *memStorage) expiries(func(expItem) error) error { return nil }

func (s *memStorage) forgetSeqno(part uint16) error {
	if int(part) < len(s.parts) {
		s.parts[part].seq.Store(0)
	}
	return nil
}

func (s *memStorage) seqnos() (map[uint16]uint64, error) {
	seqs := make(map[uint16]uint64)
	for i := range s.parts {
		if v := s.parts[i].seq.Load(); v != 0 {
			seqs[uint16(i)] = v
		}
	}
	return seqs, nil
}

func (s *memStorage) meta() (storedMeta, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := storedMeta{consumers: slices.Clone(s.consumers), clean: s.clean, sys: make(map[string][]byte, len(s.sys))}
	for _, e := range s.history {
		m.history = append(m.history, FailoverEntry{UUID: e.UUID, Seqs: slices.Clone(e.Seqs), CAS: e.CAS})
	}
	for k, v := range s.sys {
		m.sys[k] = slices.Clone(v)
	}
	m.cas = s.maxCAS
	for i := range s.parts {
		m.cas = max(m.cas, s.parts[i].cas.Load())
	}
	return m, nil
}

func (s *memStorage) putSys(key string, value []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if value == nil {
		delete(s.sys, key)
	} else {
		s.sys[key] = slices.Clone(value)
	}
	return nil
}

func (s *memStorage) putConsumers(names []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.consumers = slices.Clone(names)
	return nil
}

func (s *memStorage) begin(history []FailoverEntry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.history = nil
	for _, e := range history {
		s.history = append(s.history, FailoverEntry{UUID: e.UUID, Seqs: slices.Clone(e.Seqs), CAS: e.CAS})
	}
	s.clean = false
	return nil
}

func (s *memStorage) raiseCAS(cas uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maxCAS = max(s.maxCAS, cas)
	return nil
}

func (s *memStorage) close(clean bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clean = clean
	return nil
}
