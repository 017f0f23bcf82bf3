package kv_test

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/couchbase/gocbcore/v10/memd"
)

// TestAnswersAClientDoesNotReadAreBounded checks that a logged-in client
// that pipelines GETs of a large document and never reads the answers
// costs the server a bounded amount of memory: the connection stops
// reading requests once its unsent answers pass a bound in bytes, as the
// memcached port does (outHigh). A review found that the bound was in
// answers only (1024 queued plus 1024 running), so each connection could
// hold about 2048 copies of a value, gigabytes for 1 MiB values.
func TestAnswersAClientDoesNotReadAreBounded(t *testing.T) {
	f := newFixture(t)
	c := f.dial(t)
	c.hello()
	c.login(adminUser, adminPass)
	value := strings.Repeat("v", 1<<20)
	c.set(memd.CmdSet, "big", value, 0, 0, 0, memd.StatusSuccess)

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	// Generous: a few MiB per connection is what a bound would keep;
	// without one the answers grow to about 2 GiB.
	const bound = 384 << 20

	sent := make(chan error, 1)
	go func() {
		var err error
		for i := 0; i < 4096 && err == nil; i++ {
			c.opaque++
			err = c.mc.WritePacket(&memd.Packet{Magic: memd.CmdMagicReq, Command: memd.CmdGet, Key: []byte("big"), Opaque: c.opaque})
		}
		sent <- err
	}()

	var peak uint64
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		runtime.ReadMemStats(&ms)
		if ms.HeapInuse > base {
			peak = max(peak, ms.HeapInuse-base)
		}
		if peak > bound {
			break
		}
		select {
		case <-sent:
			// Every request went in: give the server a moment to
			// run them, then judge.
			time.Sleep(2 * time.Second)
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > base {
				peak = max(peak, ms.HeapInuse-base)
			}
			deadline = time.Now()
		case <-time.After(50 * time.Millisecond):
		}
	}
	c.nc.Close()
	if peak > bound {
		t.Fatalf("a client that never reads its answers grew the server's heap by %d MiB (bound %d MiB)", peak>>20, bound>>20)
	}
	t.Logf("heap grew by at most %d MiB", peak>>20)
}
