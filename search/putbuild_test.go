package search_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/feed"
	"github.com/mayflydb/mayfly/search"
)

// TestReplacingPutAnswersBeforeBuild: a PUT that replaces an index
// definition answers once the definition is stored and the new index's
// build has started, as Couchbase's does, not when the build ends; other
// definitions of the bucket change meanwhile, the index answers searches,
// and once the build ends the new index moves into place (after a restart
// it opens there, not rebuilt). The build is held by a hook; the waits are
// hang detectors only. On the old code the PUT waited for the whole build,
// holding the bucket's change lock.
func TestReplacingPutAnswersBeforeBuild(t *testing.T) {
	const hang = 2 * time.Minute
	e := newEnv(t, engine.Couchbase, search.Options{BatchSize: 20})
	ctx := context.Background()
	const n = 200
	for i := range n {
		e.put(fmt.Sprint("k", i), `{"text":"red fox"}`, 0)
	}
	e.createIndex("i", `{}`)
	if got := e.query("i", `{"query":{"match_all":{}},"size":0,"ctl":{"consistency":{"level":"at_plus"}}}`).TotalHits; got != n {
		t.Fatalf("before: %d hits", got)
	}

	var held atomic.Bool
	held.Store(true)
	release := make(chan struct{})
	blocked := make(chan struct{}, 1)
	search.SetApplyHook(e.svc, func(ctx context.Context, index string) error {
		if index != "i" || !held.Load() {
			return nil
		}
		select {
		case blocked <- struct{}{}:
		default:
		}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	releaseOnce := func() {
		if held.Swap(false) {
			close(release)
		}
	}
	defer releaseOnce() // before the environment closes

	put := make(chan error, 1)
	go func() {
		_, err := e.svc.PutIndex(ctx, "default", "i", []byte(`{"params":{"mapping":{"default_analyzer":"simple"}}}`))
		put <- err
	}()
	select {
	case <-blocked:
	case <-time.After(hang):
		t.Fatal("the new index's build never started")
	}
	select {
	case err := <-put:
		if err != nil {
			t.Fatalf("the replacing PUT: %v", err)
		}
	case <-time.After(hang):
		t.Fatalf("the replacing PUT had not answered after %v while its build was held: it waits for the build", hang)
	}
	// Meanwhile: another definition of the bucket changes, the index
	// answers, its definition is the new one.
	e.createIndex("j", `{}`)
	if _, err := e.svc.Query(ctx, "default", "i", []byte(`{"query":{"match_all":{}},"size":0,"ctl":{"consistency":{"level":"not_bounded"}}}`)); err != nil {
		t.Fatalf("a search during the build: %v", err)
	}
	if d, err := e.svc.GetIndex(ctx, "default", "i"); err != nil || !strings.Contains(string(d.Body), `"simple"`) {
		t.Fatalf("the definition during the build: %v %s", err, d.Body)
	}

	releaseOnce()
	if got := e.query("i", `{"query":{"match_all":{}},"size":0,"ctl":{"consistency":{"level":"at_plus"}}}`).TotalHits; got != n {
		t.Fatalf("after the build: %d hits", got)
	}
	if err := search.WaitMoved(e.svc, "default", "i"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(feed.StagingPath(search.IndexPath(e.bucket(), "i"))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the new index did not move into place: %v", err)
	}
	e.close()
	e.open()
	if got := e.query("i", `{"query":{"match_all":{}},"size":0,"ctl":{"consistency":{"level":"not_bounded"}}}`).TotalHits; got != n {
		t.Fatalf("after a restart: %d hits", got)
	}
	st, err := e.svc.IndexStats(ctx, "default", "i")
	if err != nil {
		t.Fatal(err)
	}
	if st.DocsIndexed != 0 || st.Rollbacks != 0 {
		t.Fatalf("after a restart the index was rebuilt: %+v", st)
	}
}

// TestReplacementClosedDuringBuildMovesIntoPlace: a replacement whose build
// is still running when the service closes (its move into place waits for
// the build) moves into place as it closes, so that the next start opens it
// there and resumes its build, not rebuilding it from scratch. The build
// is held by a hook after its first batch.
func TestReplacementClosedDuringBuildMovesIntoPlace(t *testing.T) {
	const hang = 2 * time.Minute
	e := newEnv(t, engine.Couchbase, search.Options{BatchSize: 20})
	ctx := context.Background()
	const n = 200
	for i := range n {
		e.put(fmt.Sprint("k", i), `{"text":"red fox"}`, 0)
	}
	e.createIndex("i", `{}`)
	if got := e.query("i", `{"query":{"match_all":{}},"size":0,"ctl":{"consistency":{"level":"at_plus"}}}`).TotalHits; got != n {
		t.Fatalf("before: %d hits", got)
	}
	var batches atomic.Int64
	blocked := make(chan struct{}, 1)
	search.SetApplyHook(e.svc, func(ctx context.Context, index string) error {
		if index != "i" || batches.Add(1) == 1 {
			return nil
		}
		select {
		case blocked <- struct{}{}:
		default:
		}
		<-ctx.Done() // held until the index closes
		return ctx.Err()
	})
	if _, err := e.svc.PutIndex(ctx, "default", "i", []byte(`{"params":{"mapping":{"default_analyzer":"simple"}}}`)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-blocked:
	case <-time.After(hang):
		t.Fatal("the new index's build never reached its second batch")
	}
	staged := feed.StagingPath(search.IndexPath(e.bucket(), "i"))
	// Closed without a Check (which would wait for the held build).
	if err := e.svc.Close(); err != nil {
		t.Fatal(err)
	}
	e.svc = nil
	e.close()
	if _, err := os.Stat(staged); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the closed index was left at the staging path: %v", err)
	}
	e.open()
	if got := e.query("i", `{"query":{"match_all":{}},"size":0,"ctl":{"consistency":{"level":"at_plus"}}}`).TotalHits; got != n {
		t.Fatalf("after a restart: %d hits", got)
	}
	st, err := e.svc.IndexStats(ctx, "default", "i")
	if err != nil {
		t.Fatal(err)
	}
	if st.DocsIndexed >= n || st.Rollbacks != 0 {
		t.Fatalf("after a restart the index was rebuilt from scratch: %+v", st)
	}
}
