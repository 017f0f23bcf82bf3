package replica

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"sync"
)

// kvMachine is the tests' state machine: a key-value map per group, fed
// "key=value" mutations, keeping the log of what it applied so replicas
// can be compared. Apply returns the key's previous value.
type kvMachine struct {
	mu   sync.Mutex
	data map[string]string
	log  []Entry // applied entries, in order (restarted by Restore)
}

func newKV() *kvMachine { return &kvMachine{data: map[string]string{}} }

// loadKV rebuilds a group's machine from the store, as a restarting node
// does before AddGroup.
func loadKV(h *Host, g GroupID) (*kvMachine, error) {
	m := newKV()
	err := h.ScanMachine(g, func(k, v []byte) error {
		m.data[string(k)] = string(v)
		return nil
	})
	return m, err
}

func (m *kvMachine) Apply(w Writer, ents []Entry) ([]any, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]any, len(ents))
	for i, e := range ents {
		k, v, ok := bytes.Cut(e.Data, []byte("="))
		if !ok {
			out[i] = fmt.Errorf("not key=value: %q", e.Data)
			continue
		}
		out[i] = m.data[string(k)]
		m.data[string(k)] = string(v)
		if err := w.Set(k, v); err != nil {
			return nil, err
		}
		m.log = append(m.log, Entry{Index: e.Index, Term: e.Term, Data: bytes.Clone(e.Data)})
	}
	return out, nil
}

func (m *kvMachine) Snapshot() ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return json.Marshal(m.data)
}

func (m *kvMachine) Restore(w Writer, data []byte) error {
	var d map[string]string
	if err := json.Unmarshal(data, &d); err != nil {
		return err
	}
	if err := w.Clear(); err != nil {
		return err
	}
	for k, v := range d {
		if err := w.Set([]byte(k), []byte(v)); err != nil {
			return err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.data = d
	m.log = nil
	return nil
}

func (m *kvMachine) get(k string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.data[k]
	return v, ok
}

func (m *kvMachine) snapshotData() map[string]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.data)
}

func (m *kvMachine) applyLog() []Entry {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Entry(nil), m.log...)
}
