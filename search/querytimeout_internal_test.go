package search

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/internal/enginetest"
)

// A search whose request gives no ctl.timeout is bounded, at_plus wait
// included, by Options.QueryTimeout (DefaultQueryTimeout, cbgt's 10
// seconds, unless set) and fails with context.DeadlineExceeded once past
// it, while ctl.timeout 0 leaves a search unbounded, as cbft does. (A
// review found that a search without ctl.timeout had no bound: an at_plus
// search behind a stuck build waited as long as its client did.)
func TestSearchWithoutTimeoutIsBoundedByDefault(t *testing.T) {
	ctx := context.Background()
	o := Options{}
	if err := o.validate(); err != nil || o.QueryTimeout != DefaultQueryTimeout {
		t.Fatalf("default QueryTimeout %v (%v), want %v", o.QueryTimeout, err, DefaultQueryTimeout)
	}

	eng, b := enginetest.DefaultBucket(t, engine.NewFakeClock(1_700_000_000))
	s, err := New(ctx, eng, &Options{QueryTimeout: 200 * time.Millisecond, NoAutoUpdate: true, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free) // before Close (cleanups run last first)
	s.hooks.apply = func(ctx context.Context, _ string) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if _, err := s.PutIndex(ctx, "default", "i", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.DefaultCollection().Upsert(ctx, "k", []byte(`{"text":"hello"}`), nil); err != nil {
		t.Fatal(err)
	}

	// No ctl.timeout: the at_plus wait, stuck, ends at QueryTimeout.
	done := make(chan error, 1)
	go func() {
		_, err := s.Search(ctx, "default", "i", []byte(`{"query":{"match_all":{}},"ctl":{"consistency":{"level":"at_plus"}}}`))
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("search without ctl.timeout behind a stuck build: %v, want context.DeadlineExceeded", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("a search without ctl.timeout behind a stuck build still waits after 60 s")
	}

	// ctl.timeout 0: no bound; it answers once the build goes on.
	go func() {
		out, err := s.Search(ctx, "default", "i", []byte(`{"query":{"match_all":{}},"ctl":{"timeout":0,"consistency":{"level":"at_plus"}}}`))
		if err == nil && out.Total != 1 {
			err = errors.New("not the one document")
		}
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("search with ctl.timeout 0 behind a stuck build answered before the build went on: %v", err)
	case <-time.After(1 * time.Second): // five times QueryTimeout
	}
	free()
	if err := <-done; err != nil {
		t.Fatalf("search with ctl.timeout 0: %v", err)
	}
}
