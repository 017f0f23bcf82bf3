package engine_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/internal/testfs"
)

// A write that has not reached disk is invisible: not readable, not in the
// change feed, not in the counters; once committed, all of them show it.
func TestFeedShowsOnlyCommittedWrites(t *testing.T) {
	ctx := context.Background()
	b, _ := newBucket(t, engine.Couchbase)
	c := b.DefaultCollection()
	if _, err := c.Upsert(ctx, "old", []byte(`{"v":1}`), nil); err != nil {
		t.Fatal(err)
	}
	high := b.HighSeqnos()
	release, err := engine.HoldCommits(b)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.Upsert(ctx, "new", []byte(`{"v":2}`), nil)
		done <- err
	}()
	// The write is queued or being committed (ep_queue_size,
	// ep_flusher_todo) but not committed.
	deadline := time.Now().Add(time.Minute) // a hang, not a busy machine
	for st := b.Stats(); st.QueueSize+st.FlusherTodo == 0; st = b.Stats() {
		if time.Now().After(deadline) {
			release()
			t.Fatal("write never queued")
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := c.Get(ctx, "new"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("uncommitted write readable: err %v", err)
	}
	if got := b.HighSeqnos(); !slices.Equal(got, high) {
		t.Errorf("high sequence numbers moved before commit")
	}
	if changes, _, _ := b.Changes(high, 0); len(changes) != 0 {
		t.Errorf("change feed shows %d uncommitted changes", len(changes))
	}
	if n := b.Stats().CurrItems; n != 1 {
		t.Errorf("curr_items %d before commit, want 1", n)
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, "new"); err != nil {
		t.Errorf("committed write not readable: %v", err)
	}
	changes, _, _ := b.Changes(high, 0)
	if len(changes) != 1 || changes[0].Key != "new" {
		t.Errorf("feed after commit: %v", changes)
	}
	if n := b.Stats().CurrItems; n != 2 {
		t.Errorf("curr_items %d after commit, want 2", n)
	}
}

// WaitChanges honours a cancelled context even when changes are pending.
func TestWaitChangesHonoursContext(t *testing.T) {
	b, _ := newBucket(t, engine.Couchbase)
	if _, err := b.DefaultCollection().Upsert(context.Background(), "k", []byte(`1`), nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.WaitChanges(ctx, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitChanges with a cancelled context and pending changes: %v", err)
	}
}

// A full disk fails writes with ErrStorage (wrapping ENOSPC), shows none of
// them, keeps every acknowledged write, and takes writes again once space is
// freed, without a restart.
func TestFullDisk(t *testing.T) {
	fs := testfs.MountSmall(t, 4<<20)
	ballast := filepath.Join(fs, "ballast")
	if err := os.WriteFile(ballast, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	dir := filepath.Join(fs, "data")
	clk := engine.NewFakeClock(t0)
	eng, err := engine.Open(dir, &engine.Options{Clock: clk, NumPartitions: 8})
	if err != nil {
		t.Fatal(err)
	}
	b, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "b", Type: engine.Couchbase})
	if err != nil {
		t.Fatal(err)
	}
	c := b.DefaultCollection()
	value := []byte(`{"pad":"` + strings.Repeat("x", 8000) + `"}`)
	acked := map[string]bool{}
	var failed []string
	for i := 0; len(failed) < 20 && i < 2000; i++ {
		key := fmt.Sprintf("k%04d", i)
		_, err := c.Upsert(ctx, key, value, nil)
		switch {
		case err == nil:
			acked[key] = true
		case errors.Is(err, engine.ErrStorage):
			if !errors.Is(err, syscall.ENOSPC) {
				t.Errorf("storage error does not wrap ENOSPC: %v", err)
			}
			failed = append(failed, key)
		default:
			t.Fatalf("write %s: %v", key, err)
		}
	}
	if len(failed) == 0 {
		t.Fatal("the disk never filled")
	}
	for _, k := range failed {
		if _, err := c.Get(ctx, k); !errors.Is(err, engine.ErrNotFound) {
			t.Errorf("failed write %s is readable (err %v)", k, err)
		}
	}
	for k := range acked {
		if _, err := c.Get(ctx, k); err != nil {
			t.Errorf("acknowledged write %s: %v", k, err)
		}
	}
	st := b.Stats()
	if st.CurrItems != int64(len(acked)) {
		t.Errorf("curr_items %d, acknowledged %d", st.CurrItems, len(acked))
	}
	if st.StorageError == "" || st.CommitFailed == 0 {
		t.Errorf("stats do not say why writes fail: %+v", st)
	}
	if changes, _, _ := b.Changes(nil, 0); len(changes) != len(acked) {
		t.Errorf("change feed has %d documents, acknowledged %d", len(changes), len(acked))
	}
	if err := eng.Check(ctx); err != nil {
		t.Errorf("after the disk filled: %v", err)
	}

	// Freeing space lets writes in again, without a restart.
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute) // a hang, not a busy machine
	for {
		_, err := c.Upsert(ctx, "after", []byte(`{"ok":true}`), nil)
		if err == nil {
			acked["after"] = true
			break
		}
		if !errors.Is(err, engine.ErrStorage) || time.Now().After(deadline) {
			t.Fatalf("writes did not resume after space was freed: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if b.Stats().StorageError != "" {
		t.Errorf("storage error still reported after recovery")
	}
	if err := eng.Check(ctx); err != nil {
		t.Errorf("after recovery: %v", err)
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	eng, err = engine.Open(dir, &engine.Options{Clock: clk, NumPartitions: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer closeChecked(t, eng)
	b, _ = eng.Bucket("b")
	c = b.DefaultCollection()
	for k := range acked {
		if _, err := c.Get(ctx, k); err != nil {
			t.Errorf("after restart, acknowledged write %s: %v", k, err)
		}
	}
	for _, k := range failed {
		if _, err := c.Get(ctx, k); !errors.Is(err, engine.ErrNotFound) {
			t.Errorf("after restart, failed write %s is readable", k)
		}
	}
	if n := b.Stats().CurrItems; n != int64(len(acked)) {
		t.Errorf("after restart curr_items %d, acknowledged %d", n, len(acked))
	}
}
