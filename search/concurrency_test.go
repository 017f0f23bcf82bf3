package search_test

import (
	"context"
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
					coll.Delete(ctx, k, nil)
					continue
				}
				coll.Upsert(ctx, k, fmt.Appendf(nil, `{"w":%d,"i":%d,"text":"word%d"}`, w, i, i%5), &engine.WriteOptions{Expiry: int64(i % 3 * 5)})
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
			e.svc.Count(ctx, "default", "b")
		}
		if err := e.svc.DeleteIndex(ctx, "default", "b"); err != nil {
			t.Error(err)
		}
	})
	wg.Go(func() {
		for range 20 {
			e.clk.Advance(1)
			e.bucket().ExpireBatch(ctx, 10)
			time.Sleep(time.Millisecond)
		}
	})
	wg.Wait()
}

// TestPromptClose: closing the service while an index has a large backlog
// returns promptly, and the index resumes after a restart.
func TestPromptClose(t *testing.T) {
	e := newEnv(t, engine.Couchbase, search.Options{BatchSize: 100})
	for i := range 5000 {
		e.put(fmt.Sprint("d", i), `{"text":"some words to index here"}`, 0)
	}
	e.createIndex("i", `{}`)
	start := time.Now()
	if err := e.svc.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Close took %v", d)
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
