package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The memcached port starts on a bucket that does not exist yet (no
// default bucket, --default-bucket "", or one deleted before a restart) and
// answers each command on documents SERVER_ERROR bucket not found: NAME
// until a bucket of that name is created, as the README's memcached section
// says; a review found serve refused to start instead ("--memcached-bucket:
// engine: bucket not found: default", exit 1).
func TestServeStartsWithoutTheMemcachedBucket(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	var stdout syncBuffer
	var stderr syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- runServe(ctx, []string{"--data", dir, "--default-bucket", "", "--http", "127.0.0.1:0",
			"--memcached", "127.0.0.1:0", "--kv", "", "--kv-tls", "", "--views", "", "--search", "",
			"--admin-password", adminPass, "--log-level", "error"}, &stdout, &stderr)
	}()
	var mcAddr string
	for deadline := time.Now().Add(3 * time.Minute); mcAddr == ""; time.Sleep(10 * time.Millisecond) {
		select {
		case err := <-done:
			t.Fatalf(`serve --default-bucket "": ended before serving memcached: %v (stderr %q)`, err, stderr.String())
		default:
		}
		if _, rest, ok := strings.Cut(stdout.String(), "serving memcached on "); ok {
			if addr, _, ok := strings.Cut(rest, " "); ok {
				mcAddr = addr
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no memcached port served; stdout %q", stdout.String())
		}
	}
	conn, err := net.DialTimeout("tcp", mcAddr, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Minute))
	if _, err := io.WriteString(conn, "get k\r\n"); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(line, "SERVER_ERROR bucket not found") {
		t.Errorf("get on the port of a missing bucket: %q, want SERVER_ERROR bucket not found: default", line)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("shutdown: %v", err)
	}
}
