//go:build linux

package memcache

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
)

// TestLoopWriteAtNoneHeldByBackpressureDoesNotHoldTheLoop: at durability
// none a write is answered from memory until the bytes acknowledged and not
// yet on disk reach engine.Options.MaxAckedBytes; the write past that waits
// for its commit. That wait must not happen on the event loop: while the
// commit is held, another connection of the same loop is answered, and the
// first connection's answers come whole and in order once it is let go.
// Fails on the code before: the write waited for its commit on the loop, so
// no connection of that loop was served until the disk answered.
func TestLoopWriteAtNoneHeldByBackpressureDoesNotHoldTheLoop(t *testing.T) {
	g := newCommitGate(t)
	eng, b := loopBucket(t, &engine.Options{NumPartitions: 64, NoSync: true, FlushInterval: time.Hour, MaxAckedBytes: 4096, CommitHook: g.hook}, engine.DurabilityNone)
	a, other := serveLoops(t, eng, b)
	t.Cleanup(g.release) // before the server's close, which waits for the loop
	g.holding.Store(true)
	// 100 sets of about 300 bytes each against a 4 KiB bound: the
	// 14th or so must wait for its commit.
	const n = 100
	var req, want strings.Builder
	for i := range n {
		fmt.Fprintf(&req, "set k%d 0 0 1\r\n%d\r\n", i, i%10)
		want.WriteString("STORED\r\n")
	}
	a.send(req.String())
	loopGoesOn(t, g.entered, "no write waited for a commit: the acknowledged bytes never reached MaxAckedBytes", other, "another connection while a write at none waits for its commit")
	g.release()
	readWithin(t, a, "the 100 sets' answers once the commit is let go", want.String())
	a.do("get k0 k99\r\n", "VALUE k0 0 1\r\n0\r\nVALUE k99 0 1\r\n9\r\nEND\r\n")
}

// gatedReplicator replicates a bucket's writes to that bucket alone,
// holding each proposal while holding is set (a Raft round trip that does
// not come back).
type gatedReplicator struct {
	b       *engine.Bucket
	holding atomic.Bool
	entered chan struct{}
	gate    chan struct{}
	mu      sync.Mutex
	next    map[int]uint64
}

func (r *gatedReplicator) Writable(context.Context, int) error { return nil }

func (r *gatedReplicator) Replicate(ctx context.Context, part int, entry []byte) (engine.ReplicatedResult, error) {
	if r.holding.Load() {
		select {
		case r.entered <- struct{}{}:
		default:
		}
		select {
		case <-r.gate:
		case <-ctx.Done():
			return engine.ReplicatedResult{}, ctx.Err()
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.next[part]++
	return r.b.ApplyReplicated(part, r.next[part], entry)
}

// TestLoopReplicatedWriteDoesNotHoldTheLoop: on a bucket whose writes are
// replicated (a cluster node's), a write waits for its log entry's commit
// on a majority whatever its durability level, so at none too it must not
// wait on the event loop: while the replication of one connection's set is
// held, another connection of the same loop is answered, and the set's
// answer comes once it is let go. Fails on the code before: the loop
// itself waited for the replication.
func TestLoopReplicatedWriteDoesNotHoldTheLoop(t *testing.T) {
	eng, b := loopBucket(t, &engine.Options{NumPartitions: 64, NoSync: true}, engine.DurabilityNone)
	r := &gatedReplicator{b: b, entered: make(chan struct{}, 1), gate: make(chan struct{}), next: map[int]uint64{}}
	release := sync.OnceFunc(func() { r.holding.Store(false); close(r.gate) })
	t.Cleanup(release)
	b.SetReplicator(r)
	a, other := serveLoops(t, eng, b)
	t.Cleanup(release) // before the server's close, which waits for the loop
	r.holding.Store(true)
	a.send("set k 0 0 1\r\nx\r\n")
	loopGoesOn(t, r.entered, "the set was never proposed", other, "another connection while a replicated write at none waits for its commit")
	release()
	readWithin(t, a, "the set's answer once the replication is let go", "STORED\r\n")
	a.do("get k\r\n", "VALUE k 0 1\r\nx\r\nEND\r\n")
}
