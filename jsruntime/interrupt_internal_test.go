package jsruntime

import (
	"context"
	"errors"
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
	p := NewPool(&Options{Workers: 1, Timeout: 5 * time.Second})
	defer p.Close()
	pr, err := p.Load([]ViewSource{{Name: "v", Map: "function (doc) { var n = 0; for (var i = 0; i < 3e5; i++) { n += i; } emit(doc.k, n); }"}})
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
	for deadline := time.Now().Add(5 * time.Second); ; { // wall clock: waiting for a goroutine to start its call
		w.mu.Lock()
		running := w.mu.running != nil
		w.mu.Unlock()
		if running || time.Now().After(deadline) { // wall clock: as above
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancelFirst()
	w.interruptFor(first)
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
	for deadline := time.Now().Add(5 * time.Second); ; { // wall clock: as above
		w.mu.Lock()
		running := w.mu.running != nil
		w.mu.Unlock()
		if running || time.Now().After(deadline) { // wall clock: as above
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancelOwn()
	w.interruptFor(own)
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("the call's own context ended: got %v, want context.Canceled", err)
	}
}
