package search

import (
	"context"
	"fmt"
	"testing"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/feed"
)

// TestReplaceKeepsIndexLeftAtStagingPath: an index whose move into place
// failed (its promote's wait ended) runs on at its staging path, where the
// next replacement builds the new index. That replacement must not take the
// running index's files: when it fails (here, its definition cannot be
// stored), the running index goes on as it was and reopens after a restart
// as it is, without a rebuild.
func TestReplaceKeepsIndexLeftAtStagingPath(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	clk := engine.NewFakeClock(1_700_000_000)
	var eng *engine.Engine
	var s *Service
	open := func() {
		var err error
		if eng, err = engine.Open(dir, &engine.Options{Clock: clk, NumPartitions: 8, NoSync: true}); err != nil {
			t.Fatal(err)
		}
		if _, err := eng.Bucket("default"); err != nil {
			if _, err := eng.CreateBucket(ctx, engine.DefaultBucketSettings("default")); err != nil {
				t.Fatal(err)
			}
		}
		if s, err = New(ctx, eng, nil); err != nil {
			t.Fatal(err)
		}
	}
	closeAll := func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
		if err := eng.Close(); err != nil {
			t.Error(err)
		}
	}
	open()
	defer func() { closeAll() }()
	b, _ := eng.Bucket("default")
	const n = 300
	for i := range n {
		if _, err := b.DefaultCollection().Upsert(ctx, fmt.Sprint("k", i), []byte(`{"text":"red fox"}`), nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.PutIndex(ctx, "default", "i", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	count := func(consistency string) uint64 {
		t.Helper()
		a, err := s.Search(ctx, "default", "i", []byte(`{"query":{"match_all":{}},"size":0,"ctl":{"consistency":{"level":"`+consistency+`"}}}`))
		if err != nil {
			t.Fatal(err)
		}
		return a.Total
	}
	if got := count("at_plus"); got != n {
		t.Fatalf("before: %d hits", got)
	}
	ix, err := s.indexerFor("default", "i")
	if err != nil {
		t.Fatal(err)
	}
	if err := ix.moveTo(ctx, feed.StagingPath(IndexPath(b, "i"))); err != nil { // where a failed promote leaves it
		t.Fatal(err)
	}
	gone, cancel := context.WithCancel(ctx)
	cancel() // the definition cannot be stored: the replacement fails after the new index started
	if _, err := s.PutIndex(gone, "default", "i", []byte(`{"params":{"mapping":{"default_analyzer":"simple"}}}`)); err == nil {
		t.Fatal("a replacement with a cancelled context succeeded")
	}
	if got := count("at_plus"); got != n {
		t.Fatalf("after the failed replacement: %d hits", got)
	}
	closeAll()
	open()
	if got := count("not_bounded"); got != n {
		t.Fatalf("after a restart: %d hits", got)
	}
	st, err := s.IndexStats(ctx, "default", "i")
	if err != nil {
		t.Fatal(err)
	}
	if st.DocsIndexed != 0 || st.Rollbacks != 0 {
		t.Fatalf("after a restart the index was rebuilt: %+v", st)
	}
}
