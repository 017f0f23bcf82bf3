package memcache

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/internal/testfs"
)

// A full disk answers SERVER_ERROR with the cause, and the failed item is not
// there to get.
func TestFullDiskIsServerError(t *testing.T) {
	dir := testfs.MountSmall(t, 3<<20)
	eng, err := engine.Open(filepath.Join(dir, "data"), &engine.Options{Clock: engine.NewFakeClock(t0), NumPartitions: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	b, err := eng.CreateBucket(context.Background(), engine.BucketSettings{Name: "default", Type: engine.Couchbase})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(context.Background(), ln) }()
	defer func() { srv.Close(); <-done }()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r := bufio.NewReader(conn)
	value := strings.Repeat("v", 16000)
	var failed, reply string
	for i := range 1000 {
		key := fmt.Sprintf("k%d", i)
		fmt.Fprintf(conn, "set %s 0 0 %d\r\n%s\r\n", key, len(value), value)
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if line != "STORED\r\n" {
			failed, reply = key, line
			break
		}
	}
	if failed == "" {
		t.Fatal("the disk never filled")
	}
	if !strings.HasPrefix(reply, "SERVER_ERROR ") || !strings.Contains(reply, "no space left on device") {
		t.Errorf("reply to a write on a full disk: %q", reply)
	}
	fmt.Fprintf(conn, "get %s\r\n", failed)
	if line, _ := r.ReadString('\n'); line != "END\r\n" {
		t.Errorf("get of the failed item: %q, want END", line)
	}
}
