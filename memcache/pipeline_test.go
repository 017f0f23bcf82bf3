package memcache

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// TestPipelinedCommands: commands sent in one write, as a pipelining client
// does, run on the connection's write pipeline and still answer exactly as
// one at a time would: replies in command order, writes to one key in
// order (set, append, incr, delete), a read seeing every earlier write of
// the connection, noreply writes included, and a bad data chunk answered in
// its place.
func TestPipelinedCommands(t *testing.T) {
	testPipelinedCommands(t, newFixture(t, nil))
}

// TestPipelinedCommandsDurable: the same at a level that waits for the
// disk, where the writes run on the connection's pipeline.
func TestPipelinedCommandsDurable(t *testing.T) {
	testPipelinedCommands(t, newLevelFixture(t, engine.DurabilityPersistToMajority, nil))
}

func testPipelinedCommands(t *testing.T, f *fixture) {
	c := f.dial(t)
	var req, want strings.Builder
	for i := range 50 {
		fmt.Fprintf(&req, "set k%d 0 0 1\r\n%d\r\n", i%5, i%10)
		want.WriteString("STORED\r\n")
	}
	req.WriteString("set n 0 0 2\r\n10\r\nincr n 5\r\nappend n 0 0 1\r\n0\r\nincr n 1\r\n")
	want.WriteString("STORED\r\n15\r\nSTORED\r\n151\r\n")
	req.WriteString("add n 0 0 1\r\nx\r\nreplace nope 0 0 1\r\nx\r\n")
	want.WriteString("NOT_STORED\r\nNOT_STORED\r\n")
	req.WriteString("set q 0 0 1 noreply\r\nA\r\nappend q 0 0 1 noreply\r\nB\r\n")
	// A data block too long: bad data chunk, and the "\r\n" left over is read
	// as an empty command line, as memcached does.
	req.WriteString("set bad 0 0 1\r\nxyz\r\n")
	want.WriteString("CLIENT_ERROR bad data chunk\r\nERROR\r\n")
	req.WriteString("delete k0\r\ndelete k0\r\ntouch k1 100\r\n")
	want.WriteString("DELETED\r\nNOT_FOUND\r\nTOUCHED\r\n")
	req.WriteString("get k0 k1 k2 k3 k4 n q\r\n")
	want.WriteString("VALUE k1 0 1\r\n6\r\nVALUE k2 0 1\r\n7\r\nVALUE k3 0 1\r\n8\r\nVALUE k4 0 1\r\n9\r\nVALUE n 0 3\r\n151\r\nVALUE q 0 2\r\nAB\r\nEND\r\n")
	c.send(req.String())
	got := c.read(len(want.String()))
	if got != want.String() {
		t.Fatalf("pipelined replies:\n got %q\nwant %q", got, want.String())
	}
	c.do("get n\r\n", "VALUE n 0 3\r\n151\r\nEND\r\n")
}

// TestPipelinedNoreplyThenClose: noreply writes still running when the
// client hangs up are finished, not lost, and leave no goroutine behind
// (the fixture's cleanup checks).
func TestPipelinedNoreplyThenClose(t *testing.T) {
	t.Run("ephemeral", func(t *testing.T) { testNoreplyThenClose(t, newFixture(t, nil)) })
	// More writes than a connection keeps in flight: the rest wait in its
	// input, and still run after the hang-up.
	t.Run("persistToMajority", func(t *testing.T) {
		testNoreplyThenClose(t, newLevelFixture(t, engine.DurabilityPersistToMajority, nil))
	})
}

func testNoreplyThenClose(t *testing.T, f *fixture) {
	c := f.dial(t)
	var req strings.Builder
	for i := range 200 {
		fmt.Fprintf(&req, "set k%d 0 0 1 noreply\r\nv\r\n", i)
	}
	c.send(req.String())
	c.nc.Close()
	c2 := f.dial(t)
	// The first connection's writes end before its goroutine does; wait for
	// them through a read of the last key, retried while it is not there yet.
	for tries := 0; ; tries++ {
		c2.send("get k199\r\n")
		if l := c2.line(); l == "VALUE k199 0 1\r\n" {
			c2.read(len("v\r\nEND\r\n"))
			break
		} else if l != "END\r\n" || tries > 10000 {
			t.Fatalf("get k199: %q after %d tries", l, tries)
		}
	}
	for i := range 200 {
		c2.do(fmt.Sprintf("get k%d\r\n", i), fmt.Sprintf("VALUE k%d 0 1\r\nv\r\nEND\r\n", i))
	}
}

// TestPipelinedRepliesKeepOrder: in a pipeline, a write that runs at once
// (nothing buffered after it, nothing in flight) answers after the
// pipelined writes before it, though their replies may not be written yet
// when it runs. Each round sends a set, then an add of a key that exists,
// in one write: STORED must come before NOT_STORED.
func TestPipelinedRepliesKeepOrder(t *testing.T) {
	f := newFixture(t, nil)
	c := f.dial(t)
	c.do("set x 0 0 1\r\nx\r\n", "STORED\r\n")
	const want = "STORED\r\nNOT_STORED\r\n"
	for i := range 3000 {
		c.send(fmt.Sprintf("set k%d 0 0 1\r\nv\r\nadd x 0 0 1\r\ny\r\n", i))
		if got := c.read(len(want)); got != want {
			t.Fatalf("round %d: got %q, want %q", i, got, want)
		}
	}
}
