package memcache

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"io"
	"net"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
)

// t0 is the fake clock's start: a moment well past 30 days after the epoch,
// so absolute and relative expiries are easy to tell apart.
const t0 = 1_700_000_000

// fixture is a Server on a loopback port over an ephemeral bucket whose
// clock only moves when told to.
type fixture struct {
	srv    *Server
	addr   string
	clock  *engine.FakeClock
	bucket *engine.Bucket
}

// newFixture starts a server; its cleanup closes it, checks that Serve
// returned ErrServerClosed, and that no goroutine of the package is left.
func newFixture(t testing.TB, opts *Options) *fixture {
	t.Helper()
	clock := engine.NewFakeClock(t0)
	return newFixtureClock(t, opts, clock, clock)
}

func newFixtureClock(t testing.TB, opts *Options, clock engine.Clock, fake *engine.FakeClock) *fixture {
	t.Helper()
	return startFixture(t, opts, clock, fake, true)
}

// startFixture starts a server on a new engine; its cleanup closes it and
// checks that Serve returned ErrServerClosed and, with checks, that the
// engine's state is consistent and no goroutine of the package is left.
func startFixture(t testing.TB, opts *Options, clock engine.Clock, fake *engine.FakeClock, checks bool) *fixture {
	t.Helper()
	eng, err := engine.Open(t.TempDir(), &engine.Options{Clock: clock, NumPartitions: 64})
	if err != nil {
		t.Fatal(err)
	}
	// Flush enabled, as the tests of flush_all need; a bucket without it
	// refuses flush_all (TestFlushAllDisabled).
	b, err := eng.CreateBucket(context.Background(), engine.BucketSettings{Name: "default", Type: engine.Ephemeral, FlushEnabled: true})
	if err != nil {
		t.Fatal(err)
	}
	srv, addr, done := serve(t, b, opts)
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := <-done; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
		if checks {
			if err := eng.Check(context.Background()); err != nil {
				t.Errorf("engine.Check: %v", err)
			}
		}
		eng.Close()
		if checks {
			checkNoLeaks(t)
		}
	})
	return &fixture{srv: srv, addr: addr, clock: fake, bucket: b}
}

// serve starts a Server for b on a new loopback port and returns it, its
// address, and the channel Serve's result arrives on once it is closed.
func serve(t testing.TB, b *engine.Bucket, opts *Options) (*Server, string, <-chan error) {
	t.Helper()
	srv, err := New(b, withIO(opts))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(context.Background(), ln) }()
	return srv, ln.Addr().String(), done
}

// ioFlag runs the package's servers with the given Options.IO (the
// default's when empty): go test ./memcache/ -args -memcache.io=goroutines
// runs every test against the goroutine driver (make race does both).
var ioFlag = flag.String("memcache.io", "", "Options.IO of the servers the tests start (eventloop or goroutines; empty: the default)")

// withIO returns opts (nil: the defaults) with -memcache.io applied.
func withIO(opts *Options) *Options {
	o := Options{}
	if opts != nil {
		o = *opts
	}
	if o.IO == "" {
		o.IO = IOModel(*ioFlag)
	}
	return &o
}

// checkNoLeaks fails if a goroutine of this package is still running.
func checkNoLeaks(t testing.TB) {
	t.Helper()
	var stacks string
	for range 6000 { // a minute: a leak, not a busy machine, gets to the end
		buf := make([]byte, 1<<20)
		stacks = string(buf[:runtime.Stack(buf, true)])
		if !strings.Contains(stacks, "memcache.(*Server)") && !strings.Contains(stacks, "memcache.(*conn)") &&
			!strings.Contains(stacks, "memcache.(*loop)") && !strings.Contains(stacks, "memcache.(*econn)") {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("goroutines left after Close:\n%s", stacks)
}

// client is a raw text-protocol connection for tests.
type client struct {
	t  testing.TB
	nc net.Conn
	r  *bufio.Reader
}

func (f *fixture) dial(t testing.TB) *client {
	t.Helper()
	return dialAddr(t, f.addr)
}

func dialAddr(t testing.TB, addr string) *client {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &client{t: t, nc: nc, r: bufio.NewReader(nc)}
}

func newReader(nc net.Conn) *bufio.Reader { return bufio.NewReader(nc) }

// ioTimeout bounds every wait of a test client.
const ioTimeout = time.Minute

// withTimeout runs fn, failing its reads if it takes longer than ioTimeout
// (by moving the read deadline into the past, so no wall-clock read is needed).
func (c *client) withTimeout(fn func() error) error {
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { c.nc.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	return fn()
}

func (c *client) send(s string) {
	c.t.Helper()
	if _, err := io.WriteString(c.nc, s); err != nil {
		c.t.Fatalf("write %q: %v", s, err)
	}
}

// read reads exactly n bytes.
func (c *client) read(n int) string {
	c.t.Helper()
	buf := make([]byte, n)
	err := c.withTimeout(func() error { _, err := io.ReadFull(c.r, buf); return err })
	if err != nil {
		c.t.Fatalf("read %d bytes: %v (got %q)", n, err, buf)
	}
	return string(buf)
}

// line reads one reply line, "\r\n" included.
func (c *client) line() string {
	c.t.Helper()
	var s string
	err := c.withTimeout(func() error { var err error; s, err = c.r.ReadString('\n'); return err })
	if err != nil {
		c.t.Fatalf("read line: %v (got %q)", err, s)
	}
	return s
}

// do sends req and checks that the reply is exactly want; then it checks,
// with a version round trip, that nothing else was sent.
func (c *client) do(req, want string) {
	c.t.Helper()
	c.send(req)
	if got := c.read(len(want)); got != want {
		c.t.Fatalf("%q: got %q, want %q", req, got, want)
	}
	c.send("version\r\n")
	if got, wantV := c.line(), "VERSION "+DefaultVersion+"\r\n"; got != wantV {
		c.t.Fatalf("after %q: got %q, want %q (a stray reply?)", req, got, wantV)
	}
}

// expectClosed checks that the server closes the connection, having sent
// exactly want before.
func (c *client) expectClosed(want string) {
	c.t.Helper()
	var got []byte
	err := c.withTimeout(func() error { var err error; got, err = io.ReadAll(c.r); return err })
	// Closing with unread input resets the connection: that is closed too.
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		c.t.Fatalf("waiting for close: %v (got %q)", err, got)
	}
	if string(got) != want {
		c.t.Fatalf("before close: got %q, want %q", got, want)
	}
}

// stats returns the general stats as a map.
func (c *client) stats() map[string]string {
	c.t.Helper()
	c.send("stats\r\n")
	m := map[string]string{}
	for {
		l := c.line()
		if l == "END\r\n" {
			return m
		}
		f := strings.Fields(l)
		if len(f) != 3 || f[0] != "STAT" {
			c.t.Fatalf("bad stats line %q", l)
		}
		m[f[1]] = f[2]
	}
}

// engineDoc is the engine's document, named for the tests' signatures.
type engineDoc = engine.Document
