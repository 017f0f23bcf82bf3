package crashtest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/internal/mayflybin"
)

// startTimeout bounds how long a (re)started server may take to listen.
const startTimeout = 60 * time.Second

// buildServer builds cmd/mayfly (mayflybin.Build: linked once for every
// test that asks, while the source is unchanged).
func buildServer(t *testing.T) string {
	t.Helper()
	bin, err := mayflybin.Build()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// adminPassword is the administrator's password of every server started.
const adminPassword = "crash-test-password"

// server is one running `mayfly serve` child.
type server struct {
	cmd    *exec.Cmd
	base   string // http://127.0.0.1:PORT
	client *http.Client
	done   chan struct{} // closed when the process has exited
	err    error         // Wait's result, once done is closed
}

// startServer starts bin on dataDir, appending its stderr to logPath, and
// waits until it prints its HTTP address. extra are more serve flags.
func startServer(bin, dataDir, logPath string, extra ...string) (*server, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child holds its own descriptor
	fmt.Fprintf(logf, "=== start %s\n", time.Now().Format(time.RFC3339Nano))
	args := append([]string{"serve", "--data", dataDir, "--http", "127.0.0.1:0", "--memcached", "", "--kv", "", "--views", "", "--search", "", "--log-level", "warn", "--admin-password", adminPassword}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Stderr = logf
	cmd.SysProcAttr = childProcAttr()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &server{cmd: cmd, done: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		// Read the address, then drain stdout so the child never blocks on it.
		sc := bufio.NewScanner(stdout)
		const prefix = "mayfly: serving HTTP on http://"
		for sc.Scan() {
			line := sc.Text()
			if rest, ok := strings.CutPrefix(line, prefix); ok {
				a, _, _ := strings.Cut(rest, ",")
				select {
				case addr <- a:
				default:
				}
			}
		}
		io.Copy(io.Discard, stdout)
	}()
	go func() {
		s.err = cmd.Wait()
		close(s.done)
	}()
	select {
	case a := <-addr:
		s.base = "http://" + a
	case <-s.done:
		return nil, fmt.Errorf("mayfly serve exited before listening: %v (log: %s)", s.err, logPath)
	case <-time.After(startTimeout):
		s.kill()
		return nil, fmt.Errorf("mayfly serve did not listen within %v (log: %s)", startTimeout, logPath)
	}
	s.client = &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			MaxIdleConns:        256,
			MaxIdleConnsPerHost: 256,
			IdleConnTimeout:     30 * time.Second,
		},
	}
	return s, nil
}

// kill sends SIGKILL and waits for the process to be gone.
func (s *server) kill() {
	if s == nil {
		return
	}
	select {
	case <-s.done:
	default:
		s.cmd.Process.Kill() // SIGKILL
		<-s.done
	}
	if s.client != nil {
		s.client.CloseIdleConnections()
	}
}

// dumpAndKill asks the server for a goroutine dump (SIGQUIT, which ends a Go
// process without any clean-up, like a kill) into its log, then makes sure
// it is gone.
func (s *server) dumpAndKill() {
	if quitSignal != nil && !s.exited() {
		s.cmd.Process.Signal(quitSignal)
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
		}
	}
	s.kill()
}

// exited reports whether the process has ended (of itself or killed).
func (s *server) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// do sends one request with its own deadline and returns status and body.
// A transport error (including the deadline) is err.
func (s *server) do(ctx context.Context, method, path string, body []byte, timeout time.Duration) (int, []byte, http.Header, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.base+path, rd)
	if err != nil {
		return 0, nil, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.SetBasicAuth("Administrator", adminPassword)
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, nil, resp.Header, err
	}
	return resp.StatusCode, b, resp.Header, nil
}

// doWarm is do for a query, retried as a client retries while the server
// answers that it is still warming up (503: a restarted server opens its
// view and search indexes in the background), until timeout.
func (s *server) doWarm(ctx context.Context, method, path string, body []byte, timeout time.Duration) (int, []byte, http.Header, error) {
	deadline := time.Now().Add(timeout) // wall clock: a real server's warm-up
	for {
		st, b, h, err := s.do(ctx, method, path, body, time.Until(deadline)) // wall clock: as above
		if err != nil || st != http.StatusServiceUnavailable || !bytes.Contains(b, []byte("warming up")) ||
			time.Now().Add(50*time.Millisecond).After(deadline) { // wall clock: as above
			return st, b, h, err
		}
		select {
		case <-ctx.Done():
			return st, b, h, err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// isTimeout reports whether err is a deadline that passed.
func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}
