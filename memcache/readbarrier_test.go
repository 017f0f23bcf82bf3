package memcache

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// barrierRoute is a Route that answers every key here, as its partition's
// leader: the partition is the key's text before ':', and each read's
// Barrier is counted per partition (and refused while refuse is set, for
// partition refusePart only when it is not 0).
type barrierRoute struct {
	mu         sync.Mutex
	calls      map[int]int
	refuse     error
	refusePart int
	far        string // keys starting "far" go to this address (another node leads them)
}

func (b *barrierRoute) route(_ context.Context, key string) (Route, error) {
	if b.far != "" && strings.HasPrefix(key, "far") {
		return Route{Node: "lead", Addr: b.far}, nil
	}
	part := 0
	fmt.Sscanf(key, "p%d:", &part)
	return Route{Partition: part, Barrier: func(context.Context) error {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.calls[part]++
		if b.refusePart != 0 && part != b.refusePart {
			return nil
		}
		return b.refuse
	}}, nil
}

func (b *barrierRoute) counts() map[int]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[int]int{}
	for k, v := range b.calls {
		out[k] = v
	}
	return out
}

func (b *barrierRoute) setRefuse(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refuse, b.refusePart = err, 0
}

// setRefusePart refuses partition part's barriers with err, and no other's.
func (b *barrierRoute) setRefusePart(part int, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refuse, b.refusePart = err, part
}

// TestReadBarrier: a read a cluster node carries out as the leader of its
// key's partition takes the Route's Barrier first (a read index), once a
// partition for a multi-get; a refused barrier is the read's SERVER_ERROR,
// not the value from this node's memory (possibly stale). Writes take no
// barrier. A forwarded connection's reads take it too, and one for a
// partition another node leads is refused rather than answered here.
func TestReadBarrier(t *testing.T) {
	forEachIO(t, func(t *testing.T, io IOModel) {
		t.Cleanup(func() { checkNoLeaks(t) })
		br := &barrierRoute{calls: map[int]int{}, far: "127.0.0.1:1"}
		f := bareFixture(t, &Options{IO: io, Route: br.route})
		c := f.dial(t)
		c.do("set p1:a 0 0 2\r\na1\r\n", "STORED\r\n")
		c.do("set p1:b 0 0 2\r\nb1\r\n", "STORED\r\n")
		c.do("set p2:a 0 0 2\r\na2\r\n", "STORED\r\n")
		c.do("touch p2:a 100\r\n", "TOUCHED\r\n")
		if n := br.counts(); len(n) != 0 {
			t.Fatalf("writes took read barriers: %v", n)
		}
		c.do("get p1:a p1:b p2:a p1:missing\r\n", "VALUE p1:a 0 2\r\na1\r\nVALUE p1:b 0 2\r\nb1\r\nVALUE p2:a 0 2\r\na2\r\nEND\r\n")
		if n := br.counts(); n[1] != 1 || n[2] != 1 || len(n) != 2 {
			t.Fatalf("a multi-get over partitions 1 and 2 took barriers %v, want one each", n)
		}
		c.do("get p1:a\r\n", "VALUE p1:a 0 2\r\na1\r\nEND\r\n")
		c.do("gat 100 p2:a\r\n", "VALUE p2:a 0 2\r\na2\r\nEND\r\n")
		if n := br.counts(); n[1] != 2 || n[2] != 2 {
			t.Fatalf("after a get and a gat: barriers %v, want two each", n)
		}

		// A refused barrier before any VALUE of the get was written: the
		// error is the get's whole answer, and the connection serves the
		// commands pipelined after it.
		br.setRefuse(fmt.Errorf("%w: partition 1: this node does not lead the group", engine.ErrNotMyVBucket))
		c.send("get p1:a\r\nset p4:z 0 0 1\r\nz\r\n")
		if got := c.line(); !strings.HasPrefix(got, "SERVER_ERROR not my vbucket") {
			t.Fatalf("a get with its barrier refused: %q, want a SERVER_ERROR", got)
		}
		if got := c.line(); got != "STORED\r\n" {
			t.Fatalf("the set pipelined after a refused get: %q, want STORED", got)
		}
		br.setRefuse(nil)
		c.do("get p1:a\r\n", "VALUE p1:a 0 2\r\na1\r\nEND\r\n")
		// Refused after a VALUE of the same get was written: the answer
		// cannot be ended truthfully, so the connection closes.
		br.setRefusePart(2, fmt.Errorf("%w: partition 2: this node does not lead the group", engine.ErrNotMyVBucket))
		c.send("get p1:a p2:a\r\n")
		if got := c.line(); got != "VALUE p1:a 0 2\r\n" {
			t.Fatalf("a multi-get's first key: %q", got)
		}
		if got := c.line(); got != "a1\r\n" {
			t.Fatalf("a multi-get's first value: %q", got)
		}
		if got := c.line(); !strings.HasPrefix(got, "SERVER_ERROR not my vbucket") {
			t.Fatalf("a multi-get's refused second key: %q, want a SERVER_ERROR", got)
		}
		c.expectClosed("")

		// A forwarded connection: its reads take the barrier too; one
		// for a partition another node leads is refused.
		br.setRefuse(nil)
		fc := f.dial(t)
		fc.do("mayfly_forwarded\r\n", "OK\r\n")
		fc.do("gets p3:x\r\n", "END\r\n")
		if n := br.counts(); n[3] != 1 {
			t.Fatalf("a forwarded connection's read took barriers %v, want one on partition 3", n)
		}
		fc.send("get far1\r\n")
		if got := fc.line(); !strings.HasPrefix(got, "SERVER_ERROR not my vbucket") || !strings.Contains(got, "node lead") {
			t.Fatalf("a forwarded read of a partition another node leads: %q", got)
		}
		fc.expectClosed("")
	})
}

// TestForwardedReadRefusedKeepsNoDeadConnection: a leader that refuses a
// forwarded read (its barrier fails) answers SERVER_ERROR and closes that
// connection; the forwarding node must not pool it, or the client's next
// command through it fails once (and a write would be reported as of
// unknown outcome though it was never sent).
func TestForwardedReadRefusedKeepsNoDeadConnection(t *testing.T) {
	forEachIO(t, func(t *testing.T, io IOModel) {
		t.Cleanup(func() { checkNoLeaks(t) })
		lb := &barrierRoute{calls: map[int]int{}}
		l := bareFixture(t, &Options{IO: io, Route: lb.route})
		fb := &barrierRoute{calls: map[int]int{}, far: l.addr}
		f := bareFixture(t, &Options{IO: io, Route: fb.route})
		c := f.dial(t)

		c.do("set far1 0 0 2\r\nv1\r\n", "STORED\r\n")
		lb.setRefuse(fmt.Errorf("%w: lost leadership", engine.ErrNotMyVBucket))
		c.send("get far1\r\n")
		if got := c.line(); !strings.HasPrefix(got, "SERVER_ERROR") {
			t.Fatalf("a read the leader refused: %q", got)
		}
		lb.setRefuse(nil)
		// The refused read's connection is closed by the leader (and the
		// client's by the follower): a new client's commands go over a
		// fresh connection to the leader and succeed.
		c = f.dial(t)
		c.do("set far1 0 0 2\r\nv2\r\n", "STORED\r\n")
		c.do("get far1\r\n", "VALUE far1 0 2\r\nv2\r\nEND\r\n")
	})
}
