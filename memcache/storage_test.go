package memcache

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/internal/testfs"
)

// fullDisk is a server over a Couchbase bucket whose data lives on a 3 MiB
// file system that a connection has filled.
type fullDisk struct {
	eng    *engine.Engine
	addr   string
	c      *client // the connection that filled the disk
	failed string  // the key of the first set refused
	reply  string  // the reply to that set, "\r\n" included
}

// fillDisk starts a server over a small file system and sets 16 kB items on
// one connection until a set is refused. Its cleanup closes the server,
// checks that Serve returned ErrServerClosed, and closes the engine.
func fillDisk(t *testing.T) *fullDisk {
	t.Helper()
	dir := testfs.MountSmall(t, 3<<20)
	eng, err := engine.Open(filepath.Join(dir, "data"), &engine.Options{Clock: engine.NewFakeClock(t0), NumPartitions: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	b, err := eng.CreateBucket(context.Background(), engine.BucketSettings{Name: "default", Type: engine.Couchbase})
	if err != nil {
		t.Fatal(err)
	}
	srv, addr, done := serve(t, b, nil)
	t.Cleanup(func() {
		srv.Close()
		if err := <-done; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v", err)
		}
	})
	d := &fullDisk{eng: eng, addr: addr}
	d.c = dialAddr(t, d.addr)
	value := strings.Repeat("v", 16000)
	for i := range 1000 {
		key := fmt.Sprintf("k%d", i)
		d.c.send(fmt.Sprintf("set %s 0 0 %d\r\n%s\r\n", key, len(value), value))
		if line := d.c.line(); line != "STORED\r\n" {
			d.failed, d.reply = key, line
			return d
		}
	}
	t.Fatal("the disk never filled")
	return nil
}

// A full disk answers SERVER_ERROR with the cause, and the failed item is not
// there to get.
func TestFullDiskIsServerError(t *testing.T) {
	d := fillDisk(t)
	if !strings.HasPrefix(d.reply, "SERVER_ERROR ") || !strings.Contains(d.reply, "no space left on device") {
		t.Errorf("reply to a write on a full disk: %q", d.reply)
	}
	d.c.send("get " + d.failed + "\r\n")
	if line := d.c.line(); line != "END\r\n" {
		t.Errorf("get of the failed item: %q, want END", line)
	}
}
