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
const slowDDoc = `{"views":{"v":{"map":"function (doc, meta) { var x = 0; for (var i = 0; i < 20000; i++) { x += i; } emit(doc.n, x); }","reduce":"_count"}}}`

// TestSIGTERMIsPrompt: mayfly serve exits within two seconds of SIGTERM while
// an index builds, a stale=false query waits for it, the pager runs and
// writers keep writing; every write acknowledged before the signal is there
// after a restart.
func TestSIGTERMIsPrompt(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the server as a child process")
	}
	tmp := t.TempDir()
	bin := buildServer(t, tmp)
	data, logPath := filepath.Join(tmp, "data"), filepath.Join(tmp, "server.log")
	for round := range 3 {
		s, err := startServer(bin, data, logPath)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		put := func(key string) bool {
			status, _, _, err := s.do(ctx, http.MethodPut, "/default/docs/"+key, fmt.Appendf(nil, `{"n":%d}`, len(key)), 10*time.Second)
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
		if status, body, _, err := s.do(ctx, http.MethodPut, fmt.Sprintf("/default/_design/slow%d", round), []byte(slowDDoc), 10*time.Second); err != nil || status/100 != 2 {
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
		case <-time.After(10 * time.Second):
			s.dumpAndKill()
			t.Fatalf("round %d: mayfly serve still running 10 s after SIGTERM (goroutines in %s)", round, logPath)
		}
		took := time.Since(start)
		close(stop)
		wg.Wait()
		if took > 2*time.Second {
			t.Errorf("round %d: mayfly serve took %v to exit after SIGTERM, want under 2 s", round, took)
		}
		if s.err != nil {
			t.Errorf("round %d: mayfly serve exited with %v after SIGTERM", round, s.err)
		}
		t.Logf("round %d: exited %v after SIGTERM, %d writes acknowledged before it", round, took, before)

		s, err = startServer(bin, data, logPath)
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
		s.kill()
	}
}
