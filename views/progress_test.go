package views_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/internal/logtest"
	"github.com/mayflydb/mayfly/views"
)

// TestBuildProgress: _info's building, docs_indexed, docs_to_index, rate and
// eta_seconds before, during and after a build; a stale=ok query says how far
// behind its index is; the log tells a big build's start and end.
func TestBuildProgress(t *testing.T) {
	var logs logtest.Buffer
	e := newEnv(t, views.Options{NoAutoUpdate: true, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	ctx := context.Background()
	const n = 6000 // more than one mapping chunk (5,000), so progress shows mid-build
	e.loadDocs(n)
	if _, err := e.svc.PutDesignDoc(ctx, "default", "slow", []byte(strings.Replace(slowMapDDoc, "3000", "200", 1))); err != nil {
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
	var during *views.Info
	for during == nil {
		select {
		case err := <-done:
			t.Fatalf("the build ended before _info showed it (%v)", err)
		default:
		}
		inf, err := e.svc.Info(ctx, "default", "slow")
		if err != nil {
			t.Fatal(err)
		}
		if inf.Building && inf.Indexed > 0 && inf.ToIndex > 0 {
			during = inf
		}
		time.Sleep(time.Millisecond)
	}
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
