package httpapi_test

import (
	"context"
	"log/slog"
	"net"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/httpapi"
	"github.com/mayflydb/mayfly/jsruntime"
	"github.com/mayflydb/mayfly/views"
)

// holdLog is a jsruntime logger whose log('hold') line says it was reached
// (reached closes) and then waits in the JavaScript call until release.
type holdLog struct {
	once    sync.Once
	reached chan struct{}
	release chan struct{}
}

func (l *holdLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *holdLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *holdLog) WithGroup(string) slog.Handler            { return l }
func (l *holdLog) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "msg" && a.Value.String() == "hold" {
			l.once.Do(func() { close(l.reached) })
			<-l.release
		}
		return true
	})
	return nil
}

// TestShutdownCutsStaleFalseQueryWith503: a stale=false view query waiting
// for its index when the server begins to shut down (its requests' base
// context cancelled with httpapi.ErrShuttingDown) is answered 503
// temporary_failure, not 200 with an empty body: its client still waits
// and must know to retry.
func TestShutdownCutsStaleFalseQueryWith503(t *testing.T) {
	const hangDeadline = 2 * time.Minute
	ctx := context.Background()
	eng, err := engine.Open(t.TempDir(), &engine.Options{NumPartitions: 4, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := eng.CreateBucket(ctx, engine.DefaultBucketSettings("default"))
	if err != nil {
		t.Fatal(err)
	}
	hl := &holdLog{reached: make(chan struct{}), release: make(chan struct{})}
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(hl.release) }) }
	vs, err := views.New(ctx, eng, &views.Options{JS: &jsruntime.Options{Logger: slog.New(hl)}})
	if err != nil {
		t.Fatal(err)
	}
	users, err := auth.Open(t.TempDir(), &auth.Options{AdminUser: adminUser, AdminPassword: adminPass, Argon2: cheapArgon2, ScramIterations: cheapScram})
	if err != nil {
		t.Fatal(err)
	}
	base, shutDown := context.WithCancelCause(ctx)
	defer shutDown(nil)
	srv := httptest.NewUnstartedServer(httpapi.New(eng, &httpapi.Options{Views: vs, Auth: users}))
	srv.Config.BaseContext = func(net.Listener) context.Context { return base }
	srv.Start()
	defer func() { release(); srv.Close(); vs.Close(); eng.Close() }()
	f := &fixture{t: t, eng: eng, srv: srv}
	if st, _, body := f.do("PUT", "/default/_design/d", "application/json", `{"views":{"v":{"map":"function (doc, meta) { if (doc.hold) log('hold'); emit(meta.id, null); }"}}}`); st != 201 {
		t.Fatalf("ddoc: %d %s", st, body)
	}
	// The index's catch-up maps this document and stays in its map call:
	// a stale=false query waits for it.
	if _, err := b.DefaultCollection().Upsert(ctx, "held", []byte(`{"hold":true}`), nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-hl.reached:
	case <-time.After(hangDeadline):
		t.Fatal("the map function never ran")
	}
	type answer struct {
		status int
		body   string
	}
	got := make(chan answer, 1)
	go func() {
		st, _, body := f.do("GET", "/default/_design/d/_view/v?stale=false", "", "")
		got <- answer{st, body}
	}()
	// The query is waiting for the index once a goroutine waits for the
	// right to catch it up.
	for deadline := time.Now().Add(hangDeadline); !waitingForCatchUp(); { // wall clock: a hang guard
		if time.Now().After(deadline) { // wall clock: a hang guard
			t.Fatal("the stale=false query never waited for the index")
		}
		runtime.Gosched()
	}
	shutDown(httpapi.ErrShuttingDown)
	var a answer
	select {
	case a = <-got:
	case <-time.After(hangDeadline):
		t.Fatal("the query did not end with the shutdown")
	}
	if a.status != 503 || jsonOf(t, a.body)["error"] != "temporary_failure" || !strings.Contains(jsonOf(t, a.body)["reason"].(string), "shutting down") {
		t.Errorf("query cut by shutdown: %d %q, want 503 temporary_failure", a.status, a.body)
	}
}

// waitingForCatchUp reports whether a goroutine waits for a feed
// consumer's right to catch up (a stale=false query behind a catch-up).
func waitingForCatchUp() bool {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Contains(string(buf[:n]), "lockUnlessHeld")
		}
		buf = make([]byte, 2*len(buf))
	}
}
