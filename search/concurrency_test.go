package search_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/search"
)

// TestConcurrent: writes, deletes, queries, a definition replaced and an
// index deleted, all at once; afterwards every index holds what the bucket
// does (Check, at cleanup).
func TestConcurrent(t *testing.T) {
	e := newEnv(t, engine.Couchbase, search.Options{BatchSize: 50})
	ctx := context.Background()
	e.createIndex("a", `{}`)
	e.createIndex("b", `{}`)
	var wg sync.WaitGroup
	coll := e.bucket().DefaultCollection()
	for w := range 2 {
		wg.Go(func() {
			for i := range 300 {
				k := fmt.Sprintf("k%d-%d", w, i%60)
				if i%7 == 3 {
					// The key may not exist (not written yet, or expired and
					// purged): only that error is expected.
					if _, err := coll.Delete(ctx, k, nil); err != nil && !errors.Is(err, engine.ErrNotFound) {
						t.Errorf("delete %s: %v", k, err)
					}
					continue
				}
				if _, err := coll.Upsert(ctx, k, fmt.Appendf(nil, `{"w":%d,"i":%d,"text":"word%d"}`, w, i, i%5), &engine.WriteOptions{Expiry: int64(i % 3 * 5)}); err != nil {
					t.Errorf("upsert %s: %v", k, err)
				}
			}
		})
	}
	wg.Go(func() {
		for i := range 40 {
			req := `{"query":{"match":"word1","field":"text"},"facets":{"t":{"field":"text","size":3}}`
			if i%2 == 0 {
				req += `,` + atPlus
			}
			if _, err := e.svc.Query(ctx, "default", "a", []byte(req+`}`)); err != nil {
				t.Error(err)
			}
		}
	})
	wg.Go(func() {
		for i := range 5 {
			if _, err := e.svc.PutIndex(ctx, "default", "b", []byte(fmt.Sprintf(`{"params":{"mapping":{"default_analyzer":"%s"}}}`, []string{"standard", "simple"}[i%2]))); err != nil {
				t.Error(err)
			}
			if _, err := e.svc.Count(ctx, "default", "b"); err != nil {
				t.Error(err)
			}
		}
		if err := e.svc.DeleteIndex(ctx, "default", "b"); err != nil {
			t.Error(err)
		}
	})
	wg.Go(func() {
		for range 20 {
			e.clk.Advance(1)
			if _, _, err := e.bucket().ExpireBatch(ctx, 10); err != nil {
				t.Error(err)
			}
			time.Sleep(time.Millisecond) // pacing, so that expirations spread over the writes; nothing depends on it
		}
	})
	wg.Wait()
}

// TestPromptClose: closing the service while an index has a large backlog
// returns (a generous deadline catches only a hang: how fast it returns is
// for a benchmark), and the index resumes after a restart.
func TestPromptClose(t *testing.T) {
	e := newEnv(t, engine.Couchbase, search.Options{BatchSize: 100})
	for i := range 5000 {
		e.put(fmt.Sprint("d", i), `{"text":"some words to index here"}`, 0)
	}
	e.createIndex("i", `{}`)
	if st, err := e.svc.IndexStats(context.Background(), "default", "i"); err == nil {
		t.Logf("closing with %d changes not indexed yet", st.SeqsBehind)
	}
	closed := make(chan error, 1)
	start := time.Now()
	go func() { closed <- e.svc.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("Close returned after %v", time.Since(start))
	case <-time.After(2 * time.Minute):
		t.Fatal("Close did not return in 2 minutes")
	}
	if _, err := e.svc.Count(context.Background(), "default", "i"); err == nil {
		t.Fatal("count after Close")
	}
	e.svc = nil
	e.close()
	e.open()
	if a := e.query("i", `{"query":{"match_all":{}},"size":0,`+atPlus+`}`); a.TotalHits != 5000 {
		t.Fatalf("after restart: %d", a.TotalHits)
	}
}
