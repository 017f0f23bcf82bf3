package memcache

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

// Tests of how connections are served, which run against either driver
// (Options.IO; -args -memcache.io=goroutines for the one that is not the
// default).

func TestIOOption(t *testing.T) {
	if got := DefaultOptions().IO; got != DefaultIO {
		t.Errorf("DefaultOptions().IO = %q, want %q", got, DefaultIO)
	}
	f := newFixture(t, nil)
	if _, err := New(f.bucket, &Options{IO: "threads"}); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("New with IO threads: %v, want ErrInvalidOptions", err)
	}
	if _, err := New(f.bucket, &Options{IO: IOGoroutines}); err != nil {
		t.Errorf("New with IO goroutines: %v", err)
	}
}

// TestSlowReader: a client that pipelines more answer than the socket
// holds and reads it only after sending everything gets every byte, in
// order (the server's writes are partial, and it stops running the
// client's commands while the answers pile up), and the connection goes on.
func TestSlowReader(t *testing.T) {
	f := newFixture(t, nil)
	c := f.dial(t)
	big := strings.Repeat("x", 500_000)
	c.do(fmt.Sprintf("set big 0 0 %d\r\n%s\r\n", len(big), big), "STORED\r\n")
	const gets = 60 // 30 MB of answers
	var req strings.Builder
	for i := range gets {
		fmt.Fprintf(&req, "set n%d 0 0 1\r\n%d\r\nget big n%d\r\n", i, i%10, i)
	}
	c.send(req.String())
	for i := range gets {
		want := fmt.Sprintf("STORED\r\nVALUE big 0 %d\r\n%s\r\nVALUE n%d 0 1\r\n%d\r\nEND\r\n", len(big), big, i, i%10)
		got := make([]byte, len(want))
		if err := c.withTimeout(func() error { _, err := io.ReadFull(c.r, got); return err }); err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		if string(got) != want {
			t.Fatalf("answer %d differs", i)
		}
	}
	c.do("get n7\r\n", "VALUE n7 0 1\r\n7\r\nEND\r\n")
}

// TestCommandsInPieces: commands that arrive a byte at a time, or with a
// data block split anywhere, are answered as whole ones.
func TestCommandsInPieces(t *testing.T) {
	f := newFixture(t, nil)
	c := f.dial(t)
	req := "set k 0 0 5\r\nhello\r\nappend k 0 0 3\r\n!!!\r\nget k\r\n"
	for i := range len(req) {
		c.send(req[i : i+1])
	}
	want := "STORED\r\nSTORED\r\nVALUE k 0 8\r\nhello!!!\r\nEND\r\n"
	if got := c.read(len(want)); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	val := strings.Repeat("0123456789", 20_000)
	req = fmt.Sprintf("set v 0 0 %d\r\n%s\r\n", len(val), val)
	for i := 0; i < len(req); i += 7_777 {
		c.send(req[i:min(i+7_777, len(req))])
	}
	c.do("", "STORED\r\n")
	c.do("get v\r\n", fmt.Sprintf("VALUE v 0 %d\r\n%s\r\nEND\r\n", len(val), val))
}

// TestBlockingCommandLeavesOthersServed: while one connection's flush_all
// waits (here for its audit record), the other connections are answered;
// the waiting connection's later commands are answered after it, in order.
func TestBlockingCommandLeavesOthersServed(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	f := newFixture(t, &Options{Audit: func(ctx context.Context, e AuditEvent) error {
		entered <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}})
	a := f.dial(t)
	a.do("set k 0 0 1\r\nv\r\n", "STORED\r\n")
	// Connections go to the loops in turn: with a few more than there are
	// loops, some share the waiting one's.
	var others []*client
	for range 8 {
		others = append(others, f.dial(t))
	}
	a.send("flush_all\r\nget k\r\nset k 0 0 1\r\nw\r\n")
	select {
	case <-entered:
	case <-time.After(ioTimeout):
		t.Fatal("flush_all never reached its audit")
	}
	for i, o := range others {
		o.do(fmt.Sprintf("set o%d 0 0 1\r\n%d\r\n", i, i), "STORED\r\n")
		o.do(fmt.Sprintf("get o%d\r\n", i), fmt.Sprintf("VALUE o%d 0 1\r\n%d\r\nEND\r\n", i, i))
	}
	close(release)
	want := "OK\r\nEND\r\nSTORED\r\n"
	if got := a.read(len(want)); got != want {
		t.Fatalf("after the flush_all: got %q, want %q", got, want)
	}
}

// TestConnectionsCounted: curr_connections follows connections as they
// come and go, so a closed connection frees its slot.
func TestConnectionsCounted(t *testing.T) {
	f := newFixture(t, &Options{MaxConns: 5})
	for round := range 3 {
		var cs []*client
		for i := range 5 {
			c := f.dial(t)
			c.do("version\r\n", "VERSION "+DefaultVersion+"\r\n") // served, not refused
			cs = append(cs, c)
			if n := f.srv.Stats().CurrConnections; n != int64(i+1) {
				t.Fatalf("round %d: %d connections open, curr_connections %d", round, i+1, n)
			}
		}
		for _, c := range cs {
			c.nc.Close()
		}
		deadline := time.Now().Add(ioTimeout)
		for f.srv.Stats().CurrConnections != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: curr_connections %d after every client left", round, f.srv.Stats().CurrConnections)
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// TestHugeMultiGetHeldBack: one multi-get whose answer is far more than the
// socket holds, sent by a client that does not read, is not answered into
// memory whole: the server stops serving its keys while the answer waits
// (as the goroutine driver's blocking writes do), and the client that then
// reads gets every value, in order, and END.
func TestHugeMultiGetHeldBack(t *testing.T) {
	f := newFixture(t, nil)
	c := f.dial(t)
	big := strings.Repeat("y", 500_000)
	c.do(fmt.Sprintf("set big 0 0 %d\r\n%s\r\n", len(big), big), "STORED\r\n")
	const keys = 120 // 60 MB of answer
	c.send("get" + strings.Repeat(" big", keys) + "\r\n")
	// The server's answer would outgrow what the kernel buffers (a few MB)
	// long before the last key: it must stop short of it while the client
	// reads nothing. A server that answers every key (into memory) gets
	// there in far less than the wait.
	deadline := time.Now().Add(3 * time.Second)
	for f.srv.Stats().GetHits < keys && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if hits := f.srv.Stats().GetHits; hits >= keys {
		t.Fatalf("all %d keys answered while the client read nothing: the answer is held in memory", hits)
	}
	want := fmt.Sprintf("VALUE big 0 %d\r\n%s\r\n", len(big), big)
	got := make([]byte, len(want))
	for i := range keys {
		if err := c.withTimeout(func() error { _, err := io.ReadFull(c.r, got); return err }); err != nil {
			t.Fatalf("value %d: %v", i, err)
		}
		if string(got) != want {
			t.Fatalf("value %d differs", i)
		}
	}
	if l := c.line(); l != "END\r\n" {
		t.Fatalf("after the values: %q, want END", l)
	}
	if hits := f.srv.Stats().GetHits; hits != keys {
		t.Errorf("get_hits %d, want %d", hits, keys)
	}
	c.do("get big\r\n", want+"END\r\n")
}

// TestHugeMultiGetSlowReader: a client that reads a multi-get's long
// answer slowly, but steadily, is not closed as stalled mid-command
// (CommandTimeout) however long the whole answer takes.
func TestHugeMultiGetSlowReader(t *testing.T) {
	// Two seconds: half the whole answer's time, with room for a loaded
	// machine's pauses between two reads.
	f := newFixture(t, &Options{CommandTimeout: 2 * time.Second})
	c := f.dial(t)
	big := strings.Repeat("z", 200_000)
	c.do(fmt.Sprintf("set big 0 0 %d\r\n%s\r\n", len(big), big), "STORED\r\n")
	const keys = 200 // 40 MB of answer, read over 4 s or more
	c.send("get" + strings.Repeat(" big", keys) + "\r\n")
	want := fmt.Sprintf("VALUE big 0 %d\r\n%s\r\n", len(big), big)
	got := make([]byte, len(want))
	for i := range keys {
		time.Sleep(20 * time.Millisecond)
		if err := c.withTimeout(func() error { _, err := io.ReadFull(c.r, got); return err }); err != nil {
			t.Fatalf("value %d: %v", i, err)
		}
		if string(got) != want {
			t.Fatalf("value %d differs", i)
		}
	}
	if l := c.line(); l != "END\r\n" {
		t.Fatalf("after the values: %q, want END", l)
	}
	if kicks := f.srv.Stats().IdleKicks; kicks != 0 {
		t.Errorf("idle_kicks %d, want 0", kicks)
	}
}
