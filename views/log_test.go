package views_test

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/internal/logtest"
	"github.com/mayflydb/mayfly/views"
)

// Creating, updating (with the same functions or new ones) and deleting a
// design document logs one info line each, naming the bucket and the design
// document and saying what happens to its index.
func TestLogDesignDocChanged(t *testing.T) {
	var logs logtest.Buffer
	e := newEnv(t, views.Options{Logger: logs.Logger()})
	ctx := context.Background()
	const v1 = `{"views":{"v":{"map":"function (doc) { emit(doc.n, null); }"}}}`
	steps := []struct {
		do            func() error
		change, index string
	}{
		{func() error { _, err := e.svc.PutDesignDoc(ctx, "default", "d", []byte(v1)); return err }, "created", "building"},
		{func() error {
			_, err := e.svc.PutDesignDoc(ctx, "default", "d", []byte(`{"views":{"v":{"map":"function (doc) { emit(doc.n, null); }"}},"note":"same functions"}`))
			return err
		}, "updated", "kept"},
		{func() error {
			_, err := e.svc.PutDesignDoc(ctx, "default", "d", []byte(`{"views":{"v":{"map":"function (doc) { emit(doc.m, null); }"}}}`))
			return err
		}, "updated", "rebuilding"},
		{func() error { return e.svc.DeleteDesignDoc(ctx, "default", "d") }, "deleted", "removed"},
	}
	for i, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		got := logs.Records(t, "design document changed")
		if len(got) != i+1 {
			t.Fatalf("after step %d: %d lines, want %d: %v", i, len(got), i+1, got)
		}
		l := got[i]
		if l["level"] != "INFO" || l["bucket"] != "default" || l["ddoc"] != "_design/d" || l["change"] != st.change || l["index"] != st.index {
			t.Errorf("step %d: line %v, want change=%s index=%s", i, l, st.change, st.index)
		}
	}
	// A refused design document changes nothing and logs no change.
	if _, err := e.svc.PutDesignDoc(ctx, "default", "d", []byte(`{"views":{"v":{"map":"function ("}}}`)); err == nil {
		t.Fatal("a map function with a syntax error was accepted")
	}
	if got := logs.Records(t, "design document changed"); len(got) != len(steps) {
		t.Errorf("a refused design document was logged: %v", got[len(steps):])
	}
}

const mapFailedMsg = "view map function failed for a document; it has no rows in the view"

// A burst of 10,000 map errors gives a bounded number of log lines, each
// naming the view and the document; when the budget refills, the next line
// says how many were suppressed. _info still counts every error.
func TestLogMapErrorsRateLimited(t *testing.T) {
	var logs logtest.Buffer
	e := newEnv(t, views.Options{Logger: logs.Logger()})
	ctx := context.Background()
	const n = 10000
	loadInto(t, e.coll(), n)
	if _, err := e.svc.PutDesignDoc(ctx, "default", "bad", []byte(`{"views":{"v":{"map":"function (doc, meta) { throw new Error('no ' + meta.id); }"}}}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := queryRows(ctx, e.svc, "default", "bad", "v", "stale=false"); err != nil {
		t.Fatal(err)
	}
	inf, err := e.svc.Info(ctx, "default", "bad")
	if err != nil {
		t.Fatal(err)
	}
	if got := inf.Views["v"].MapErrors; got != n {
		t.Fatalf("_info counts %d map errors, want %d", got, n)
	}
	lines := logs.Records(t, mapFailedMsg)
	// The bucket's clock stands still: only the burst gets through.
	if len(lines) == 0 || len(lines) > 10 {
		t.Fatalf("%d log lines for %d map errors, want 1 to 10", len(lines), n)
	}
	for _, l := range lines {
		id, _ := l["id"].(string)
		if l["level"] != "WARN" || l["view"] != "v" || l["ddoc"] != "_design/bad" || l["bucket"] != "default" ||
			!strings.HasPrefix(id, "k") || !strings.Contains(fmt.Sprint(l["err"]), "no "+id) {
			t.Errorf("map error line %v", l)
		}
	}
	e.clk.Advance(5)
	e.put("late", `{}`)
	if _, err := queryRows(ctx, e.svc, "default", "bad", "v", "stale=false"); err != nil {
		t.Fatal(err)
	}
	after := logs.Records(t, mapFailedMsg)
	if len(after) != len(lines)+1 {
		t.Fatalf("%d lines after the budget refilled, want %d", len(after), len(lines)+1)
	}
	if l := after[len(after)-1]; l["id"] != "late" || l["suppressed"] != float64(n-len(lines)) {
		t.Errorf("line after the burst = %v, want id late and suppressed %d", l, n-len(lines))
	}
}

// A failed built-in reduce logs the view and the document at fault, and
// repeated failures are rate-limited too.
func TestLogReduceErrors(t *testing.T) {
	var logs logtest.Buffer
	e := newEnv(t, views.Options{Logger: logs.Logger()})
	ctx := context.Background()
	e.put("g1", `{"player":"ann","score":3}`)
	e.put("g2", `{"player":"bo"}`)
	if _, err := e.svc.PutDesignDoc(ctx, "default", "game", []byte(`{"views":{"score":{"map":"function (doc) { emit(doc.player, doc.score); }","reduce":"_sum"}}}`)); err != nil {
		t.Fatal(err)
	}
	q, _ := url.ParseQuery("stale=false")
	p, err := views.ParseParams(q, nil)
	if err != nil {
		t.Fatal(err)
	}
	const queries = 100
	for range queries {
		prep, err := e.svc.Prepare(ctx, "default", "game", "score", p)
		if err != nil {
			t.Fatal(err)
		}
		if err := prep.Run(ctx, io.Discard); err == nil {
			t.Fatal("the reduce over a null value succeeded")
		}
	}
	lines := logs.Records(t, "view reduce failed; queries of the view that reduce over the row at fault fail")
	if len(lines) == 0 || len(lines) > 10 {
		t.Fatalf("%d log lines for %d failed reduces, want 1 to 10", len(lines), queries)
	}
	if l := lines[0]; l["view"] != "score" || l["id"] != "g2" || l["ddoc"] != "_design/game" || l["error"] != "error" ||
		l["reason"] != "Reducer: Error building index for view `score`, reason: Value is not a number (key \"bo\")" {
		t.Errorf("reduce error line %v", l)
	}
}
