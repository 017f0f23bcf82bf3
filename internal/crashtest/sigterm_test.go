package crashtest

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// slowDDoc's map spends a while on every document, so that an index build
// over a few thousand documents is still running when the signal comes.
// stuckDDoc is a design document whose map spins on one document (the
// preload's key r<round>-pre1500) until interrupted: under a 10-minute
// --js-timeout its index build cannot finish by itself while the test runs.
func stuckDDoc(round int) []byte {
	return fmt.Appendf(nil, `{"views":{"v":{"map":"function (doc, meta) { if (meta.id === 'r%d-pre1500') { while (true) {} } emit(doc.n, null); }","reduce":"_count"}}}`, round)
}

// TestSIGTERMIsPrompt: mayfly serve exits on SIGTERM without waiting for
// an index build that cannot finish by itself, a stale=false query that
// waits for it, the pager's run or the writers that keep writing; every
// write acknowledged before the signal is there after a restart. How fast
// it exits is logged, not asserted (a busy machine stretches it): the
// deadline of a minute only catches a server that waits.
func TestSIGTERMIsPrompt(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the server as a child process")
	}
	tmp := t.TempDir()
	bin := buildServer(t)
	data, logPath := filepath.Join(tmp, "data"), filepath.Join(tmp, "server.log")
	for round := range 3 {
		s, err := startServer(bin, data, logPath, "--js-timeout", "10m")
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		put := func(key string) bool {
			status, _, _, err := s.do(ctx, http.MethodPut, "/default/docs/"+key, fmt.Appendf(nil, `{"n":%d}`, len(key)), time.Minute)
			return err == nil && status/100 == 2
		}
		var pre sync.WaitGroup
		for w := range 16 {
			pre.Go(func() {
				for i := w; i < 3000; i += 16 {
					if !put(fmt.Sprintf("r%d-pre%d", round, i)) {
						t.Errorf("round %d: preload write %d failed", round, i)
						return
					}
				}
			})
		}
		pre.Wait()
		if status, body, _, err := s.do(ctx, http.MethodPut, fmt.Sprintf("/default/_design/slow%d", round), stuckDDoc(round), time.Minute); err != nil || status/100 != 2 {
			t.Fatalf("round %d: design document: %d %s %v", round, status, body, err)
		}
		var mu sync.Mutex
		var acked []string
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := range 16 {
			wg.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					key := fmt.Sprintf("r%d-w%d-%d", round, w, i)
					if put(key) {
						mu.Lock()
						acked = append(acked, key)
						mu.Unlock()
					}
				}
			})
		}
		wg.Go(func() {
			s.do(ctx, http.MethodGet, fmt.Sprintf("/default/_design/slow%d/_view/v?stale=false", round), nil, 30*time.Second)
		})
		wg.Go(func() {
			s.do(ctx, http.MethodPost, "/pools/default/buckets/default/controller/runExpiryPager", nil, 30*time.Second)
		})
		time.Sleep(300 * time.Millisecond)
		mu.Lock()
		before := len(acked) // acknowledged before the signal
		mu.Unlock()
		start := time.Now()
		if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case <-s.done:
		case <-time.After(time.Minute):
			s.dumpAndKill()
			t.Fatalf("round %d: mayfly serve still running a minute after SIGTERM (goroutines in %s)", round, logPath)
		}
		took := time.Since(start)
		close(stop)
		wg.Wait()
		if s.err != nil {
			t.Errorf("round %d: mayfly serve exited with %v after SIGTERM", round, s.err)
		}
		t.Logf("round %d: exited %v after SIGTERM, %d writes acknowledged before it", round, took, before)

		s, err = startServer(bin, data, logPath, "--js-timeout", "10m")
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		for _, key := range acked[:before] {
			if status, _, _, err := s.do(ctx, http.MethodGet, "/default/docs/"+key, nil, 10*time.Second); err != nil || status != http.StatusOK {
				t.Errorf("round %d: acknowledged write %s after restart: %d %v", round, key, status, err)
				break
			}
		}
		mu.Unlock()
		// The next round's server must not spin on this round's document
		// too: one spinning call per round, as the test means.
		// (Right after the restart the bucket may still be opening its
		// indexes: 503, retry shortly, as a client does.)
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) { // wall clock: a hang guard
			status, body, _, err := s.do(ctx, http.MethodDelete, fmt.Sprintf("/default/_design/slow%d", round), nil, time.Minute)
			if err == nil && status == http.StatusServiceUnavailable && time.Now().Before(deadline) { // wall clock: a hang guard
				continue
			}
			if err != nil || status/100 != 2 {
				t.Errorf("round %d: deleting the design document: %d %s %v", round, status, body, err)
			}
			break
		}
		s.kill()
	}
}
