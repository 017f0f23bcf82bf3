package feed_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/mayflydb/mayfly/feed"
)

// member is an index that records what was done to it.
type member struct {
	name   string
	paused bool
	closed bool
}

func (m *member) Close() error         { m.closed = true; return nil }
func (m *member) PauseAcks(pause bool) { m.paused = pause }

var errStore = errors.New("disk full")

// Replacing a member is staged: the old one runs, paused, while the new one
// starts and its definition is stored; a failure leaves the old one as it
// was; a success closes the old one after the new one took its place, then
// promotes the new one.
func TestReplaceStaged(t *testing.T) {
	eng, b, _ := newEngine(t)
	errClosed, errNone, errNotFound := errors.New("closed"), errors.New("none"), errors.New("not found")
	reg, err := feed.Attach(context.Background(), eng, feed.RegistryOptions[*member, struct{}]{
		Kind: "test", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		ErrClosed: errClosed, ErrNone: errNone, ErrNotFound: errNotFound,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	set, unlock, err := reg.Change(b.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()

	var log []string
	dir := t.TempDir()
	started := map[string]*member{}
	replacement := func(name string, storeErr error) feed.Replacement[*member] {
		return feed.Replacement[*member]{
			Path:        filepath.Join(dir, "x"),
			Feed:        b.Consumer("test:x"),
			RemoveFiles: func() error { log = append(log, "remove files"); return nil },
			Start: func(staged bool) (*member, error) {
				if old, ok, _ := set.Get("x"); ok && !old.paused {
					t.Errorf("%s started while the old member still acknowledged", name)
				}
				log = append(log, "start "+name+map[bool]string{true: " staged", false: ""}[staged])
				started[name] = &member{name: name}
				return started[name], nil
			},
			Store: func() error { log = append(log, "store "+name); return storeErr },
			Promote: func(m *member) error {
				if old, _, _ := set.Get("x"); old != m {
					t.Errorf("promoted %s before it took over", m.name)
				}
				log = append(log, "promote "+m.name)
				return nil
			},
		}
	}
	first, replaced, err := feed.Replace(context.Background(), set, "x", replacement("a", nil))
	if err != nil || replaced {
		t.Fatalf("first: replaced %v, %v", replaced, err)
	}
	if _, _, err := feed.Replace(context.Background(), set, "x", replacement("b", errStore)); !errors.Is(err, errStore) {
		t.Fatalf("a failed store: %v", err)
	}
	if !started["b"].closed {
		t.Fatal("a new member whose definition could not be stored was left open")
	}
	if got, _, _ := set.Get("x"); got != first || first.paused || first.closed {
		t.Fatalf("after a failed replacement the old member is %+v (running %v), want it running, not paused", first, got == first)
	}
	second, replaced, err := feed.Replace(context.Background(), set, "x", replacement("c", nil))
	if err != nil || !replaced {
		t.Fatalf("second: replaced %v, %v", replaced, err)
	}
	if got, _, _ := set.Get("x"); got != second || !first.closed || second.closed {
		t.Fatalf("after the replacement: running %v, old closed %v", got.name, first.closed)
	}
	want := []string{"remove files", "start a", "store a", "start b staged", "store b", "start c staged", "store c", "promote c"}
	if len(log) != len(want) {
		t.Fatalf("steps %v, want %v", log, want)
	}
	for i := range want {
		if log[i] != want[i] {
			t.Fatalf("steps %v, want %v", log, want)
		}
	}
}
