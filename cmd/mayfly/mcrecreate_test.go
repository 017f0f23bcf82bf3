package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// TestMemcachedServesBucketCreatedAgain: the memcached port as serve wires
// it serves the bucket of --memcached-bucket's name as it is now: deleted,
// its commands are answered that there is no such bucket; created again,
// it is served, on connections opened before and after. On the old code
// every command after the deletion answered "SERVER_ERROR the bucket is
// closed" until a restart.
func TestMemcachedServesBucketCreatedAgain(t *testing.T) {
	ctx := context.Background()
	eng, cfg, ln := memcachedAsServed(t, nil)
	type conn struct {
		net.Conn
		r *bufio.Reader
	}
	dial := func() *conn {
		nc, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		return &conn{nc, bufio.NewReader(nc)}
	}
	ask := func(c *conn, cmd, want string) {
		t.Helper()
		fmt.Fprint(c, cmd)
		got := ""
		for len(got) < len(want) {
			line, err := c.r.ReadString('\n')
			got += line
			if err != nil {
				break
			}
		}
		if got != want {
			t.Fatalf("%q: %q, want %q", cmd, got, want)
		}
	}
	before := dial()
	ask(before, "set k 0 0 1\r\nv\r\n", "STORED\r\n")

	if err := eng.DeleteBucket(ctx, cfg.mcBucket); err != nil {
		t.Fatal(err)
	}
	ask(before, "get k\r\n", "SERVER_ERROR bucket not found: default\r\n")
	ask(dial(), "set k 0 0 1\r\nv\r\n", "SERVER_ERROR bucket not found: default\r\n")

	if _, err := eng.CreateBucket(ctx, engine.DefaultBucketSettings(cfg.mcBucket)); err != nil {
		t.Fatal(err)
	}
	after := dial()
	ask(after, "get k\r\n", "END\r\n")
	ask(after, "set k 0 0 2\r\nv2\r\n", "STORED\r\n")
	ask(before, "get k\r\n", "VALUE k 0 2\r\nv2\r\nEND\r\n")
}

// memcachedAsServed starts the memcached port as serve wires it, with the
// serve flags args, on an engine of its own holding the port's bucket; all
// of it ends with the test.
func memcachedAsServed(t *testing.T, args []string) (*engine.Engine, *serveConfig, net.Listener) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cfg, err := parseServeFlags(args, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.Open(t.TempDir(), &engine.Options{Clock: engine.NewFakeClock(1_700_000_000), NumPartitions: 8, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	if _, err := eng.CreateBucket(ctx, engine.DefaultBucketSettings(cfg.mcBucket)); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mc, err := startMemcached(ctx, eng, cfg, slog.New(slog.DiscardHandler), nil, ln, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mc.Close() })
	return eng, cfg, ln
}
