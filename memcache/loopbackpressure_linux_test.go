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
	ctx := context.Background()
	var holding atomic.Bool
	gate := make(chan struct{})
	entered := make(chan struct{}, 1)
	release := sync.OnceFunc(func() { holding.Store(false); close(gate) })
	t.Cleanup(release)
	eng, err := engine.Open(t.TempDir(), &engine.Options{NumPartitions: 64, NoSync: true, FlushInterval: time.Hour, MaxAckedBytes: 4096,
		CommitHook: func(string) {
			if holding.Load() {
				select {
				case entered <- struct{}{}:
				default:
				}
				<-gate
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "default", Type: engine.Couchbase, DurabilityMinLevel: engine.DurabilityNone})
	if err != nil {
		eng.Close()
		t.Fatal(err)
	}
	a, other := serveLoops(t, eng, b)
	t.Cleanup(release) // before the server's close, which waits for the loop
	holding.Store(true)
	// 100 sets of about 300 bytes each against a 4 KiB bound: the
	// 14th or so must wait for its commit.
	const n = 100
	var req, want strings.Builder
	for i := range n {
		fmt.Fprintf(&req, "set k%d 0 0 1\r\n%d\r\n", i, i%10)
		want.WriteString("STORED\r\n")
	}
	a.send(req.String())
	select {
	case <-entered:
	case <-time.After(heldAnswerTimeout):
		t.Fatal("no write waited for a commit: the acknowledged bytes never reached MaxAckedBytes")
	}
	other.send("version\r\n")
	readWithin(t, other, "another connection while a write at none waits for its commit", "VERSION "+DefaultVersion+"\r\n")
	release()
	readWithin(t, a, "the 100 sets' answers once the commit is let go", want.String())
	a.do("get k0 k99\r\n", "VALUE k0 0 1\r\n0\r\nVALUE k99 0 1\r\n9\r\nEND\r\n")
}
