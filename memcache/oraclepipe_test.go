//go:build oracle

package memcache

import (
	"fmt"
	"io"
	"math/rand"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
)

// pipelineScript is a random burst of 400 commands on three keys, a third
// of the writes noreply (storage commands, incr, decr, delete, touch, a cas
// with a CAS no item has, gets of every key), ending with a get and quit.
func pipelineScript(r *rand.Rand) string {
	var b strings.Builder
	keys := []string{"k0", "k1", "k2"}
	for range 400 {
		k := keys[r.Intn(len(keys))]
		nr := ""
		if r.Intn(3) == 0 {
			nr = " noreply"
		}
		val := fmt.Sprint(r.Intn(1000))
		if r.Intn(4) == 0 {
			val = "x" + val // not a number: incr and decr refuse it
		}
		switch r.Intn(12) {
		case 0, 1:
			fmt.Fprintf(&b, "set %s %d 0 %d%s\r\n%s\r\n", k, r.Intn(3), len(val), nr, val)
		case 2:
			fmt.Fprintf(&b, "add %s 0 0 %d%s\r\n%s\r\n", k, len(val), nr, val)
		case 3:
			fmt.Fprintf(&b, "replace %s 0 0 %d%s\r\n%s\r\n", k, len(val), nr, val)
		case 4:
			fmt.Fprintf(&b, "append %s 0 0 %d%s\r\n%s\r\n", k, len(val), nr, val)
		case 5:
			fmt.Fprintf(&b, "prepend %s 0 0 %d%s\r\n%s\r\n", k, len(val), nr, val)
		case 6:
			fmt.Fprintf(&b, "incr %s %d%s\r\n", k, r.Intn(50), nr)
		case 7:
			fmt.Fprintf(&b, "decr %s %d%s\r\n", k, r.Intn(50), nr)
		case 8:
			fmt.Fprintf(&b, "delete %s%s\r\n", k, nr)
		case 9:
			fmt.Fprintf(&b, "touch %s 0%s\r\n", k, nr)
		case 10:
			fmt.Fprintf(&b, "get %s\r\n", strings.Join(keys, " "))
		case 11:
			fmt.Fprintf(&b, "cas %s 0 0 %d 99999%s\r\n%s\r\n", k, len(val), nr, val)
		}
	}
	b.WriteString("get k0 k1 k2\r\nquit\r\n")
	return b.String()
}

// pipelineRun sends script in one burst and returns everything answered
// until the server closes (the script ends with quit).
func pipelineRun(t *testing.T, addr, script string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Minute)) // wall clock: catches a hang only
	go io.WriteString(c, script)
	out, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("%s: %v", addr, err)
	}
	return string(out)
}

// comparePipelined runs 200 random scripts against memcached and addr, each
// from empty keys, and reports the first line that differs in each.
func comparePipelined(t *testing.T, mc, addr string) {
	t.Helper()
	const clear = "delete k0\r\ndelete k1\r\ndelete k2\r\nquit\r\n"
	for seed := range 200 {
		script := pipelineScript(rand.New(rand.NewSource(int64(seed))))
		pipelineRun(t, mc, clear)
		pipelineRun(t, addr, clear)
		want, got := pipelineRun(t, mc, script), pipelineRun(t, addr, script)
		if want == got {
			continue
		}
		wl, gl := strings.Split(want, "\r\n"), strings.Split(got, "\r\n")
		for i := range min(len(wl), len(gl)) {
			if wl[i] != gl[i] {
				t.Errorf("seed %d: answer line %d: memcached %q, mayfly %q (%d lines against %d)", seed, i, wl[i], gl[i], len(wl), len(gl))
				break
			}
		}
	}
}

// TestOraclePipelined: bursts of pipelined and noreply commands get the
// answers real memcached gives, byte for byte and in order, at none and at
// persistToMajority, from either driver.
func TestOraclePipelined(t *testing.T) {
	mc := startMemcached(t)
	for _, level := range []engine.Durability{engine.DurabilityNone, engine.DurabilityPersistToMajority} {
		for _, model := range []IOModel{IOEventLoop, IOGoroutines} {
			t.Run(string(level)+"/"+string(model), func(t *testing.T) {
				f := newLevelFixture(t, level, &Options{IO: model})
				comparePipelined(t, mc, f.addr)
			})
		}
	}
}

// TestOraclePipelinedAckedBound: the same at none with the bound on
// writes acknowledged from memory tiny and batches of 7 records, so that
// writes keep waiting for their commits (on the event loop, handed off
// from it: engine.ErrWouldBlock), and the answers stay memcached's.
func TestOraclePipelinedAckedBound(t *testing.T) {
	mc := startMemcached(t)
	for _, model := range []IOModel{IOEventLoop, IOGoroutines} {
		t.Run(string(model), func(t *testing.T) {
			eng, err := engine.Open(t.TempDir(), &engine.Options{NumPartitions: 16, NoSync: true, FlushInterval: time.Millisecond, MaxAckedBytes: 2048, MaxBatchSize: 7})
			if err != nil {
				t.Fatal(err)
			}
			b, err := eng.CreateBucket(t.Context(), engine.BucketSettings{Name: "default", DurabilityMinLevel: engine.DurabilityNone})
			if err != nil {
				eng.Close()
				t.Fatal(err)
			}
			srv, addr, done := serve(t, b, &Options{IO: model})
			t.Cleanup(func() {
				srv.Close()
				<-done
				eng.Close()
			})
			comparePipelined(t, mc, addr)
		})
	}
}
