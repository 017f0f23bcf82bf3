package memcache

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

func TestConnectionLimit(t *testing.T) {
	f := newFixture(t, &Options{MaxConns: 3})
	var cs []*client
	for range 3 {
		c := f.dial(t)
		c.do("set k 0 0 1\r\nv\r\n", "STORED\r\n")
		cs = append(cs, c)
	}
	over := f.dial(t)
	over.expectClosed("ERROR Too many open connections\r\n")
	// The admitted connections are unharmed.
	cs[0].do("get k\r\n", present)

	// Once one leaves, a new one gets in.
	cs[2].nc.Close()
	for i := 0; ; i++ {
		c := f.dial(t)
		c.send("version\r\n")
		var got []byte
		c.withTimeout(func() error { var err error; got, err = c.r.ReadBytes('\n'); return err })
		if string(got) == "VERSION "+DefaultVersion+"\r\n" {
			break
		}
		if i == 1000 {
			t.Fatalf("no connection admitted after one closed; last reply %q", got)
		}
	}
	st := f.srv.Stats()
	if st.RejectedConnections < 1 || st.CurrConnections != 3 {
		t.Fatalf("stats %+v", st)
	}
}

func TestThousandsOfConnections(t *testing.T) {
	f := newFixture(t, nil) // MaxConns 1024
	const n = 1100
	conns := make([]net.Conn, 0, n)
	for range n {
		nc, err := net.Dial("tcp", f.addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, nc)
	}
	defer func() {
		for _, nc := range conns {
			nc.Close()
		}
	}()
	// Every connection either works or was told why it was refused.
	refused := 0
	for _, nc := range conns {
		c := &client{t: t, nc: nc, r: newReader(nc)}
		c.send("version\r\n")
		switch l := c.line(); l {
		case "VERSION " + DefaultVersion + "\r\n":
		case replyTooManyConns + "\r\n":
			refused++
		default:
			t.Fatalf("reply %q", l)
		}
	}
	if refused != n-1024 {
		t.Fatalf("refused %d connections, want %d", refused, n-1024)
	}
	ok := &client{t: t, nc: conns[0], r: newReader(conns[0])}
	ok.do("set k 0 0 1\r\nv\r\n", "STORED\r\n")
}

func TestLongLines(t *testing.T) {
	f := newFixture(t, nil)

	t.Run("junk without newline closes silently", func(t *testing.T) {
		c := f.dial(t)
		c.send(strings.Repeat("a", 3000))
		c.expectClosed("")
	})
	t.Run("a storage line over MaxLineLen closes", func(t *testing.T) {
		c := f.dial(t)
		c.send("set " + strings.Repeat("k", 3000) + " 0 0 1\r\nv\r\n")
		c.expectClosed("")
	})
	t.Run("the answers before a line too long are sent", func(t *testing.T) {
		c := f.dial(t)
		c.send("set k 0 0 1\r\nv\r\nget k\r\nversion " + strings.Repeat("a", 3000) + "\r\n")
		c.expectClosed("STORED\r\n" + present)
	})
	t.Run("a long multi-get is fine", func(t *testing.T) {
		c := f.dial(t)
		c.do("set k 0 0 1\r\nv\r\n", "STORED\r\n")
		keys := strings.Repeat("nokey ", 100_000/6)
		c.do("get "+keys+"k\r\n", present)
		c.do("gat 0 "+keys+"k\r\n", present)
	})
	t.Run("a multi-get over MaxGetLineLen closes", func(t *testing.T) {
		c := f.dial(t)
		c.send("get " + strings.Repeat("nokey ", (2<<20)/6) + "\r\n")
		c.expectClosed("")
	})
	t.Run("a 1 GiB line is cut off early", func(t *testing.T) {
		c := f.dial(t)
		chunk := []byte("get " + strings.Repeat("a", 1<<20))
		sent := 0
		for sent < 1<<30 {
			n, err := c.nc.Write(chunk)
			sent += n
			if err != nil {
				break
			}
			chunk = []byte(strings.Repeat("a", 1<<20))
		}
		if sent >= 1<<30 {
			t.Fatal("the server read a whole 1 GiB line")
		}
		t.Logf("server closed after %d MiB were sent", sent>>20)
	})
	// The server still serves.
	f.dial(t).do("set k 0 0 1\r\nv\r\n", "STORED\r\n")
}

func TestMalformedLinesKeepTheConnection(t *testing.T) {
	f := newFixture(t, nil)
	c := f.dial(t)
	// A pipeline of good and bad requests: each gets its own answer.
	c.send("set a 0 0 1\r\n1\r\nbogus\r\nget a\r\nincr a x\r\nincr a 1\r\n\r\nget a\r\n")
	want := "STORED\r\nERROR\r\nVALUE a 0 1\r\n1\r\nEND\r\nCLIENT_ERROR invalid numeric delta argument\r\n2\r\nERROR\r\nVALUE a 0 1\r\n2\r\nEND\r\n"
	if got := c.read(len(want)); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestServeStopsOnContext(t *testing.T) {
	eng, err := engine.Open(t.TempDir(), &engine.Options{Clock: engine.NewFakeClock(t0), NumPartitions: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	b, err := eng.CreateBucket(t.Context(), engine.BucketSettings{Name: "default", Type: engine.Ephemeral})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(b, withIO(nil))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	c := dialAddr(t, ln.Addr().String())
	c.do("set k 0 0 1\r\nv\r\n", "STORED\r\n")
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Serve returned %v", err)
	}
	c.expectClosed("")
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(context.Background(), ln); !errors.Is(err, ErrServerClosed) {
		t.Fatalf("Serve after Close returned %v", err)
	}
	checkNoLeaks(t)
}

func TestCloseWithBusyConnections(t *testing.T) {
	f := newFixture(t, nil)
	// A client that never reads its answers and one in the middle of a data
	// block: Close must not wait for them.
	c1 := f.dial(t)
	go func() {
		for {
			if _, err := io.WriteString(c1.nc, "get k k k k k k k k k k k k k k k k\r\n"); err != nil {
				return
			}
		}
	}()
	c2 := f.dial(t)
	c2.send("set k 0 0 100\r\nabc")
	c3 := f.dial(t)
	c3.do("version\r\n", "VERSION "+DefaultVersion+"\r\n")
	// The fixture's cleanup closes the server and checks for leaks.
}

func TestNewValidatesOptions(t *testing.T) {
	f := newFixture(t, nil)
	for _, o := range []*Options{
		{MaxConns: -1},
		{MaxLineLen: 10},
		{MaxLineLen: 4096, MaxGetLineLen: 1024},
		{MaxItemSize: 100},
		{MaxItemSize: engine.MaxValueLen + 1},
		{Version: "1\r\n2"},
	} {
		if _, err := New(f.bucket, o); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("New(%+v) = %v, want ErrInvalidOptions", o, err)
		}
	}
	if _, err := New(nil, nil); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("New(nil) = %v", err)
	}
}
