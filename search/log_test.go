package search_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/internal/logtest"
	"github.com/mayflydb/mayfly/search"
)

// Creating an index logs it once, and the end of its first build once with
// the documents indexed and the rate; replacing it with a new mapping logs
// the rebuild and its end; deleting it logs that. Later small catch-ups log
// nothing at info level.
func TestLogSearchIndexLifecycle(t *testing.T) {
	var logs logtest.Buffer
	e := newEnv(t, engine.Couchbase, search.Options{Logger: logs.Logger()})
	const n = 30
	for i := range n {
		e.put(fmt.Sprint("k", i), fmt.Sprintf(`{"title":"doc %d"}`, i), 0)
	}
	e.createIndex("ix", `{}`)
	if a := e.query("ix", `{"query":{"match_all":{}},`+atPlus+`}`); a.TotalHits != n {
		t.Fatalf("%d hits, want %d", a.TotalHits, n)
	}
	created := logs.Records(t, "search index created")
	if len(created) != 1 || created[0]["level"] != "INFO" || created[0]["bucket"] != "default" || created[0]["index"] != "ix" {
		t.Fatalf("created lines: %v", created)
	}
	// The build's end is logged once its catch-up returns, which a query
	// that found the index caught up did not wait for.
	built := logs.WaitRecords(t, "search index build finished", 1)
	if len(built) != 1 {
		t.Fatalf("%d build lines, want 1: %v", len(built), built)
	}
	if b := built[0]; b["level"] != "INFO" || b["index"] != "ix" || b["bucket"] != "default" || b["documents"] != float64(n) || b["rate"] == nil {
		t.Errorf("build line %v", b)
	}
	// A small catch-up is no build.
	e.put("late", `{"title":"late"}`, 0)
	if a := e.query("ix", `{"query":{"match_all":{}},`+atPlus+`}`); a.TotalHits != n+1 {
		t.Fatalf("%d hits, want %d", a.TotalHits, n+1)
	}
	if built := logs.Records(t, "search index build finished"); len(built) != 1 {
		t.Errorf("a one-document catch-up was logged as a build: %v", built)
	}
	// The same definition again keeps the index.
	e.createIndex("ix", `{}`)
	// A new mapping rebuilds it.
	e.createIndex("ix", `{"params":{"mapping":{"default_mapping":{"dynamic":false,"properties":{"title":{"fields":[{"name":"title","type":"text","index":true}]}}}}}}`)
	if a := e.query("ix", `{"query":{"match":"late","field":"title"},`+atPlus+`}`); a.TotalHits != 1 {
		t.Fatalf("after the rebuild: %d hits", a.TotalHits)
	}
	updated := logs.Records(t, "search index updated")
	if len(updated) != 2 || updated[0]["rebuild"] != false || updated[1]["rebuild"] != true || updated[1]["index"] != "ix" {
		t.Errorf("updated lines: %v", updated)
	}
	built = logs.WaitRecords(t, "search index build finished", 2)
	if len(built) != 2 || built[1]["documents"] != float64(n+1) {
		t.Errorf("build lines after the rebuild: %v", built)
	}
	if err := e.svc.DeleteIndex(context.Background(), "default", "ix"); err != nil {
		t.Fatal(err)
	}
	if deleted := logs.Records(t, "search index deleted"); len(deleted) != 1 || deleted[0]["index"] != "ix" || deleted[0]["bucket"] != "default" {
		t.Errorf("deleted lines: %v", deleted)
	}
	if created := logs.Records(t, "search index created"); len(created) != 1 {
		t.Errorf("created lines at the end: %v", created)
	}
}
