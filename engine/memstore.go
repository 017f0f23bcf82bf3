package engine

import (
	"fmt"
	"maps"
	"slices"
	"sync"
)

// memStorage is the store of a bucket that keeps nothing on disk (ephemeral
// and memcached buckets). It keeps no documents, which live only in the
// partitions, and no expiry entries; it keeps the partitions' sequence
// numbers, the CAS and the metadata, so that the engine runs the same code
// for every bucket. Its commits cannot fail, and it loses everything when the
// process ends: each open is a new, empty store.
type memStorage struct {
	mu        sync.Mutex
	seqs      map[uint16]uint64
	cas       uint64
	consumers []string
	history   []FailoverEntry
	clean     bool
	sys       map[string][]byte
}

func newMemStorage() *memStorage {
	return &memStorage{seqs: make(map[uint16]uint64), sys: make(map[string][]byte)}
}

func (s *memStorage) durable() bool { return false }

func (s *memStorage) encode(record) []byte { return nil }

func (s *memStorage) commit(recs []record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range recs {
		r := &recs[i]
		if !r.purge && r.seq > s.seqs[r.part] {
			s.seqs[r.part] = r.seq
		}
		s.cas = max(s.cas, r.cas)
	}
	return nil
}

func (s *memStorage) probe() error { return nil }

func (s *memStorage) doc(k docKey) (*Document, error) {
	return nil, fmt.Errorf("%w: %s (a memory-only bucket keeps documents in its partitions only)", ErrNotFound, k.key)
}

func (s *memStorage) scan(func(*Document) error) error { return nil }

func (s *memStorage) expiries(func(expItem) error) error { return nil }

func (s *memStorage) seqnos() (map[uint16]uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.seqs), nil
}

func (s *memStorage) meta() (storedMeta, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := storedMeta{cas: s.cas, consumers: slices.Clone(s.consumers), clean: s.clean, sys: make(map[string][]byte, len(s.sys))}
	for _, e := range s.history {
		m.history = append(m.history, FailoverEntry{UUID: e.UUID, Seqs: slices.Clone(e.Seqs)})
	}
	for k, v := range s.sys {
		m.sys[k] = slices.Clone(v)
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
		s.history = append(s.history, FailoverEntry{UUID: e.UUID, Seqs: slices.Clone(e.Seqs)})
	}
	s.clean = false
	return nil
}

func (s *memStorage) close(clean bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clean = clean
	return nil
}
