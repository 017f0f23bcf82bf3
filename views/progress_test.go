package views_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/internal/logtest"
	"github.com/mayflydb/mayfly/jsruntime"
	"github.com/mayflydb/mayfly/views"
)

// TestBuildProgress: _info's building, docs_indexed, docs_to_index, rate and
// eta_seconds before, during and after a build; a stale=ok query says how far
// behind its index is; the log tells a big build's start and end.
func TestBuildProgress(t *testing.T) {
	var logs logtest.Buffer
	js := newJSLog()
	e := newEnv(t, views.Options{NoAutoUpdate: true, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		JS: &jsruntime.Options{Logger: slog.New(js)}})
	release := js.holdOn("held")
	t.Cleanup(release) // runs before e's cleanup, which closes the service
	ctx := context.Background()
	const n = 6000 // more than one mapping chunk (5,000), so progress shows mid-build
	e.loadDocs(n)
	// The map holds the build on a document of the second chunk (in the
	// feed's order), so that _info is read mid-build, not polled for.
	b, err := e.eng.Bucket("default")
	if err != nil {
		t.Fatal(err)
	}
	changes, _, err := b.Changes(nil, 0)
	if err != nil || len(changes) != n {
		t.Fatalf("feed: %d changes, %v", len(changes), err)
	}
	ddoc := fmt.Sprintf(`{"views":{"v":{"map":"function (doc, meta) { if (meta.id === '%s') { log('held'); } emit(doc.n, null); }","reduce":"_count"}}}`, changes[5500].Key)
	if _, err := e.svc.PutDesignDoc(ctx, "default", "slow", []byte(ddoc)); err != nil {
		t.Fatal(err)
	}
	inf, err := e.svc.Info(ctx, "default", "slow")
	if err != nil {
		t.Fatal(err)
	}
	if inf.Building || inf.ToIndex != n || inf.Indexed != 0 || inf.ETA != 0 {
		t.Fatalf("before: %+v", inf.BuildInfo)
	}
	q, _ := url.ParseQuery("stale=ok")
	p, _ := views.ParseParams(q, nil)
	qu, err := e.svc.Prepare(ctx, "default", "slow", "v", p)
	if err != nil {
		t.Fatal(err)
	}
	if b := qu.Behind(); b != n {
		t.Errorf("stale=ok query behind by %d, want %d", b, n)
	}
	done := make(chan error, 1)
	go func() {
		_, err := queryRows(ctx, e.svc, "default", "slow", "v", "stale=false")
		done <- err
	}()
	js.wait(t, "held")
	during, err := e.svc.Info(ctx, "default", "slow")
	if err != nil {
		t.Fatal(err)
	}
	if !during.Building || during.Indexed == 0 || during.ToIndex == 0 {
		t.Errorf("during: %+v", during.BuildInfo)
	}
	release()
	if during.Rate <= 0 || during.ETA <= 0 || during.Indexed+during.ToIndex != n {
		t.Errorf("during: %+v", during.BuildInfo)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	inf, _ = e.svc.Info(ctx, "default", "slow")
	if inf.Building || inf.ToIndex != 0 || inf.Indexed != n || inf.Rate <= 0 || inf.ETA != 0 {
		t.Errorf("after: %+v", inf.BuildInfo)
	}
	qu, _ = e.svc.Prepare(ctx, "default", "slow", "v", p)
	if b := qu.Behind(); b != 0 {
		t.Errorf("caught-up query behind by %d", b)
	}
	out := logs.String()
	if !strings.Contains(out, fmt.Sprintf("level=INFO msg=\"views: index build started\" ddoc=_design/slow pending_changes=%d", n)) ||
		!strings.Contains(out, fmt.Sprintf("level=INFO msg=\"views: index build ended\" ddoc=_design/slow changes_indexed=%d", n)) ||
		!strings.Contains(out, " rate=") {
		t.Errorf("log:\n%s", out)
	}
}
