package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// durableKV is a DurableMachine: a key-value map whose applied entries
// reach its own "store" (durable, kept by the test across restarts) only
// when it is synced or the test says so, not through Writer.
type durableKV struct {
	mu      sync.Mutex
	data    map[string]string
	applied []Entry // applied and not yet durable, in order
	store   *kvStore
}

// kvStore is what survives a durableKV's crash.
type kvStore struct {
	mu     sync.Mutex
	data   map[string]string
	index  uint64
	syncs  int
	replay []uint64 // indexes applied after a restart, in order
}

func (s *kvStore) open() *durableKV {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := &durableKV{data: map[string]string{}, store: s}
	for k, v := range s.data {
		d.data[k] = v
	}
	return d
}

func (d *durableKV) Apply(_ Writer, ents []Entry) ([]any, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]any, len(ents))
	for _, e := range ents {
		d.store.mu.Lock()
		held := e.Index <= d.store.index
		d.store.replay = append(d.store.replay, e.Index)
		d.store.mu.Unlock()
		if held {
			continue
		}
		k, v, _ := bytes.Cut(e.Data, []byte("="))
		d.data[string(k)] = string(v)
		d.applied = append(d.applied, Entry{Index: e.Index, Data: bytes.Clone(e.Data)})
	}
	return out, nil
}

// persist moves the applied entries up to index into the store.
func (d *durableKV) persist(index uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.store.mu.Lock()
	defer d.store.mu.Unlock()
	if d.store.data == nil {
		d.store.data = map[string]string{}
	}
	for len(d.applied) > 0 && d.applied[0].Index <= index {
		k, v, _ := bytes.Cut(d.applied[0].Data, []byte("="))
		d.store.data[string(k)] = string(v)
		d.store.index = d.applied[0].Index
		d.applied = d.applied[1:]
	}
}

func (d *durableKV) Durable() uint64 {
	d.store.mu.Lock()
	defer d.store.mu.Unlock()
	return d.store.index
}

func (d *durableKV) Sync(context.Context) error {
	d.persist(^uint64(0))
	d.store.mu.Lock()
	d.store.syncs++
	d.store.mu.Unlock()
	return nil
}

func (d *durableKV) Snapshot() ([]byte, error) { return nil, nil }
func (d *durableKV) Restore(Writer, []byte) error {
	return fmt.Errorf("not in this test")
}

func (d *durableKV) get(k string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.data[k]
}

// A DurableMachine restarts from its own durable position, not the Host's
// stored applied index: the entries it had applied but not made durable
// are replayed from the log, and those it held are not handed to it
// again. Before a snapshot (and the log compaction behind it) the Host
// syncs it, so neither passes what it holds.
func TestDurableMachineReplaysFromItsPosition(t *testing.T) {
	dir := t.TempDir()
	st := &kvStore{}
	open := func(o func(*Options)) (*Host, *durableKV) {
		opts := Options{Dir: filepath.Join(dir, "n1"), Node: "n1", Listen: "127.0.0.1:0", Resolver: StaticResolver{}}
		if o != nil {
			o(&opts)
		}
		h, err := Open(opts)
		if err != nil {
			t.Fatal(err)
		}
		sm := st.open()
		if err := h.AddGroup(7, []string{"n1"}, sm); err != nil {
			t.Fatal(err)
		}
		return h, sm
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	propose := func(h *Host, data string) Result {
		t.Helper()
		for {
			res, err := h.Propose(ctx, 7, []byte(data))
			if err == nil {
				return res
			}
			if ctx.Err() != nil {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond) // electing itself
		}
	}
	h, sm := open(nil)
	var idx []uint64
	for i := range 20 {
		idx = append(idx, propose(h, fmt.Sprintf("k%d=%d", i, i)).Index)
	}
	sm.persist(idx[9]) // the machine's store holds the first ten
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	st.replay = nil

	h, sm = open(nil)
	propose(h, "after=1") // the group runs: the log replayed before it
	for i := range 20 {
		if got := sm.get(fmt.Sprintf("k%d", i)); got != fmt.Sprint(i) {
			t.Fatalf("k%d = %q after the restart", i, got)
		}
	}
	st.mu.Lock()
	first := st.replay[0]
	st.mu.Unlock()
	if first != idx[9]+1 {
		t.Fatalf("the replay began at %d, want %d (after the durable position)", first, idx[9]+1)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}

	h, _ = open(func(o *Options) { o.SnapshotEntries, o.KeepEntries = 10, 3 })
	defer h.Close()
	for i := range 25 {
		propose(h, fmt.Sprintf("s%d=1", i))
	}
	eventually(t, "a snapshot", func() error {
		if h.Stats().SnapshotsTaken == 0 {
			return fmt.Errorf("none taken")
		}
		return nil
	})
	st.mu.Lock()
	syncs, held := st.syncs, st.index
	st.mu.Unlock()
	if syncs == 0 || held < idx[19] {
		t.Fatalf("snapshots taken without syncing the machine first: %d syncs, durable at %d", syncs, held)
	}
}

// A new group refuses a DurableMachine that already holds entries its log
// never had (a bucket written to before its node joined a cluster).
func TestNewGroupRefusesMachineAhead(t *testing.T) {
	h, err := Open(Options{Dir: t.TempDir(), Node: "n1", Listen: "127.0.0.1:0", Resolver: StaticResolver{}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	st := &kvStore{data: map[string]string{"k": "local"}, index: 5}
	if err := h.AddGroup(1, []string{"n1"}, st.open()); !errors.Is(err, ErrMachineAhead) {
		t.Fatalf("AddGroup of a machine at 5 for a new group: %v", err)
	}
	if err := h.AddGroup(1, []string{"n1"}, (&kvStore{}).open()); err != nil {
		t.Fatalf("the same group with an empty machine: %v", err)
	}
}
