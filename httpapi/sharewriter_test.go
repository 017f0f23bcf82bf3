package httpapi

import (
	"bytes"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"
)

// A share's rows are written through shareWriter: when the node asked
// stops reading (its merge waits on a client that stopped reading), the
// write fails once no progress was made for the idle time, so the share
// ends and its handler returns (its slot and index snapshot freed) rather
// than hold them until the server's write timeout.
func TestShareWriterGivesUpOnAStalledReader(t *testing.T) {
	done := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := shareWriter(w, 200*time.Millisecond)
		chunk := bytes.Repeat([]byte("x"), 64<<10)
		for range 1 << 12 { // 256 MiB: far past what the sockets buffer
			if _, err := sw.Write(chunk); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}))
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	// The client reads nothing.
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("the share's write ended with %v, want a deadline exceeded", err)
		}
	case <-time.After(2 * time.Minute): // a hang guard, not a speed assertion
		t.Fatal("the share's writer still waits on a reader that stopped reading")
	}
}
