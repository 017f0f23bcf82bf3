package jsruntime

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"
)

// TestLateInterruptSparesTheNextCall: a Map registers an interruption with
// context.AfterFunc for as long as it uses a worker; when its context ends
// just as it finishes, that function can run after the worker went on to
// another caller's call. It must not stop that call: the crash test saw a
// document lose its rows in one view of a design document being built
// while the design document it replaced was closed (its context cancelled)
// on the same pool.
func TestLateInterruptSparesTheNextCall(t *testing.T) {
	// The map function logs first; the handler reports the call running and
	// holds it there until the test has delivered the interruption, so
	// that the interruption always meets a running call (no sleeping, no
	// race with a call that ends first).
	running, resume := make(chan struct{}), make(chan struct{})
	p := NewPool(&Options{Workers: 1, Timeout: time.Minute,
		Logger: slog.New(&holdHandler{running: running, resume: resume})})
	defer p.Close()
	pr, err := p.Load([]ViewSource{{Name: "v", Map: "function (doc) { log('running'); var n = 0; for (var i = 0; i < 1000; i++) { n += i; } emit(doc.k, n); }"}})
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	w := newWorker(p)
	rt, err := w.runtimeFor(pr)
	if err != nil {
		t.Fatal(err)
	}
	first, cancelFirst := context.WithCancel(context.Background())
	second := context.Background()
	done := make(chan error, 1)
	go func() {
		// The second caller's call, running when the first caller's late
		// interruption arrives.
		var arena emitArena
		out := make([]ViewResult, 1)
		if err := rt.mapDoc(second, w, &Doc{Value: []byte(`{"k":1}`), Meta: Meta{ID: "d", Type: TypeJSON}}, out, &arena); err != nil {
			done <- err
			return
		}
		done <- out[0].Err
	}()
	// Wait until the call runs, then deliver the first caller's interruption.
	waitRunning(t, running, done)
	cancelFirst()
	w.interruptFor(first)
	resume <- struct{}{}
	if err := <-done; err != nil {
		t.Fatalf("a late interruption meant for another context failed the call: %v", err)
	}
	// The call's own context still interrupts it.
	own, cancelOwn := context.WithCancel(context.Background())
	go func() {
		var arena emitArena
		out := make([]ViewResult, 1)
		done <- rt.mapDoc(own, w, &Doc{Value: []byte(`{"k":2}`), Meta: Meta{ID: "e", Type: TypeJSON}}, out, &arena)
	}()
	waitRunning(t, running, done)
	cancelOwn()
	w.interruptFor(own)
	resume <- struct{}{}
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("the call's own context ended: got %v, want context.Canceled", err)
	}
}

// waitRunning waits for holdHandler's report that a call runs (it fails the
// test if the call ends first, or nothing comes in a minute: a hang).
func waitRunning(t *testing.T, running <-chan struct{}, done <-chan error) {
	t.Helper()
	select {
	case <-running:
	case err := <-done:
		t.Fatalf("the call ended before it ran log(): %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the call did not start in a minute")
	}
}

// holdHandler is a slog handler for Options.Logger: each record (a log(...)
// call of a map function) reports on running, then waits for resume, on
// the call's own goroutine.
type holdHandler struct{ running, resume chan struct{} }

func (h *holdHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *holdHandler) Handle(context.Context, slog.Record) error {
	h.running <- struct{}{}
	<-h.resume
	return nil
}
func (h *holdHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *holdHandler) WithGroup(string) slog.Handler      { return h }
