//go:build linux

package memcache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
)

// What a connection of an event loop waits for must not hold up the loop's
// other connections. The tests hold the engine's disk (a value read back
// from the store, a group commit) in a hook, and check that another
// connection on the same loop is answered meanwhile. The deadline of those
// answers only catches a loop held until the hook lets go (the old
// behaviour); nothing here measures speed.

// heldAnswerTimeout bounds the wait for an answer that must come while the
// disk is held.
const heldAnswerTimeout = 20 * time.Second

// serveLoops serves b from event loops and returns connections n+1, where
// n is the number of loops: the first and the last share a loop (a new
// connection goes to the next loop in turn, and each is answered before the
// next is dialed). The server is closed, and engine closed, at cleanup.
func serveLoops(t *testing.T, eng *engine.Engine, b *engine.Bucket) (first, last *client) {
	t.Helper()
	srv, addr, done := serve(t, b, &Options{IO: IOEventLoop})
	t.Cleanup(func() {
		srv.Close()
		<-done
		eng.Close()
		checkNoLeaks(t)
	})
	var cs []*client
	for range runtime.GOMAXPROCS(0) + 1 {
		c := dialAddr(t, addr)
		c.send("version\r\n")
		c.line()
		cs = append(cs, c)
	}
	return cs[0], cs[len(cs)-1]
}

// readWithin reads exactly len(want) bytes from c within heldAnswerTimeout
// and fails unless they are want.
func readWithin(t *testing.T, c *client, what, want string) {
	t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(heldAnswerTimeout)) // wall clock: catches a hang only
	defer c.nc.SetReadDeadline(time.Time{})
	buf := make([]byte, len(want))
	if _, err := io.ReadFull(c.r, buf); err != nil || string(buf) != want {
		t.Fatalf("%s: got %.80q (%v), want %.80q", what, buf, err, want)
	}
}

// TestLoopGetOfEjectedValueDoesNotHoldTheLoop: a get whose value was
// ejected from memory (a 1 MiB quota) reads it back from the store on a
// goroutine of its own, not on the event loop: while that read is held,
// another connection of the same loop gets its answer, and the first
// connection's answers, once the read is let go, come whole and in order.
// Fails on the code before: the loop itself waited for the read.
func TestLoopGetOfEjectedValueDoesNotHoldTheLoop(t *testing.T) {
	ctx := context.Background()
	var target atomic.Value // the key whose store read is held
	target.Store("")
	entered := make(chan struct{}, 1)
	hold := make(chan struct{})
	release := sync.OnceFunc(func() { close(hold) })
	t.Cleanup(release)
	eng, err := engine.Open(t.TempDir(), &engine.Options{NumPartitions: 64, FetchHook: func(_, key string) {
		if key == target.Load().(string) {
			select {
			case entered <- struct{}{}:
			default:
			}
			<-hold
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "default", Type: engine.Couchbase, RAMQuotaMB: 1})
	if err != nil {
		eng.Close()
		t.Fatal(err)
	}
	coll := b.DefaultCollection()
	val := func(i int) string { return fmt.Sprintf("%05d%s", i, strings.Repeat("x", 4091)) }
	for i := range 1000 {
		if _, err := coll.Upsert(ctx, fmt.Sprintf("k%d", i), []byte(val(i)), nil); err != nil {
			eng.Close()
			t.Fatal(err)
		}
	}
	ejected, resident := -1, -1
	for i := 999; i >= 0 && (ejected < 0 || resident < 0); i-- {
		switch _, err := coll.GetResident(ctx, fmt.Sprintf("k%d", i)); {
		case errors.Is(err, engine.ErrWouldBlock):
			ejected = max(ejected, i)
		case err == nil && resident < 0:
			resident = i
		}
	}
	if ejected < 0 || resident < 0 {
		eng.Close()
		t.Fatalf("1,000 values of 4 KiB under a 1 MiB quota: ejected %d, resident %d; want one of each", ejected, resident)
	}
	a, other := serveLoops(t, eng, b)
	t.Cleanup(release) // before the server's close, which waits for the loop
	item := func(i int) string {
		return fmt.Sprintf("VALUE k%d 0 4096\r\n%s\r\n", i, val(i))
	}
	target.Store(fmt.Sprintf("k%d", ejected))
	a.send(fmt.Sprintf("get k%d k%d\r\nget k%d\r\n", ejected, resident, resident))
	select {
	case <-entered:
	case <-time.After(heldAnswerTimeout):
		t.Fatal("the get of an ejected value never read the store")
	}
	other.send(fmt.Sprintf("get k%d\r\n", resident))
	readWithin(t, other, "another connection's get while the loop's read of an ejected value is held", item(resident)+"END\r\n")
	release()
	readWithin(t, a, "the answers once the read is let go", item(ejected)+item(resident)+"END\r\n"+item(resident)+"END\r\n")
	a.do("version\r\n", "VERSION "+DefaultVersion+"\r\n")
}

// TestLoopGetOfExpiredKeysDoesNotWaitForCommits: gets of 300 expired keys
// on one connection answer while every commit is held (their deletions go
// to disk after), another connection of the same loop is answered
// meanwhile, and curr_items has dropped when they answer. Fails on the
// code before: each get waited for its deletion's commit, on the loop.
func TestLoopGetOfExpiredKeysDoesNotWaitForCommits(t *testing.T) {
	ctx := context.Background()
	clk := engine.NewFakeClock(t0)
	var holding atomic.Bool
	gate := make(chan struct{})
	release := sync.OnceFunc(func() { holding.Store(false); close(gate) })
	t.Cleanup(release)
	eng, err := engine.Open(t.TempDir(), &engine.Options{Clock: clk, NumPartitions: 64, CommitHook: func(string) {
		if holding.Load() {
			<-gate
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "default", Type: engine.Couchbase})
	if err != nil {
		eng.Close()
		t.Fatal(err)
	}
	coll := b.DefaultCollection()
	var keys []string
	for i := range 300 {
		k := fmt.Sprintf("e%d", i)
		keys = append(keys, k)
		if _, err := coll.Upsert(ctx, k, []byte("v"), &engine.WriteOptions{Expiry: 10}); err != nil {
			eng.Close()
			t.Fatal(err)
		}
	}
	if _, err := coll.Upsert(ctx, "live", []byte("here"), nil); err != nil {
		eng.Close()
		t.Fatal(err)
	}
	a, other := serveLoops(t, eng, b)
	t.Cleanup(release) // before the server's close, which waits for the loop
	clk.Advance(10)
	holding.Store(true)
	a.send("get " + strings.Join(keys, " ") + "\r\n")
	other.send("get live\r\n")
	readWithin(t, other, "another connection's get while commits are held", "VALUE live 0 4\r\nhere\r\nEND\r\n")
	readWithin(t, a, "gets of 300 expired keys while commits are held", "END\r\n")
	if st := b.Stats(); st.CurrItems != 1 || st.ExpiredAccess != 300 {
		t.Fatalf("when the gets answered: curr_items %d, expired on access %d; want 1, 300", st.CurrItems, st.ExpiredAccess)
	}
	other.send("stats\r\n")
	var stats bytes.Buffer
	for {
		l := other.line()
		stats.WriteString(l)
		if l == "END\r\n" {
			break
		}
	}
	if !strings.Contains(stats.String(), "STAT curr_items 1\r\n") {
		t.Fatalf("stats while the deletions wait for disk:\n%s\nwant curr_items 1", stats.String())
	}
	release()
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if st := b.Stats(); st.CurrItems != 1 || st.Tombstones != 300 {
		t.Fatalf("after the commits: curr_items %d, tombstones %d; want 1, 300", st.CurrItems, st.Tombstones)
	}
	if err := b.Check(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestLoopGatPastTheOutputBound: a gat at a level that waits for the disk
// runs on a goroutine of its own, and its replies stop at the connection's
// output bound (outHigh), going on once they are sent, rather than all
// buffered at once: 300 values of 8 KiB (2.4 MB, past the 1 MiB bound) come
// whole and in order, and the connection goes on after.
func TestLoopGatPastTheOutputBound(t *testing.T) {
	ctx := context.Background()
	eng, err := engine.Open(t.TempDir(), &engine.Options{NumPartitions: 64})
	if err != nil {
		t.Fatal(err)
	}
	b, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "default", Type: engine.Couchbase, DurabilityMinLevel: engine.DurabilityPersistToMajority})
	if err != nil {
		eng.Close()
		t.Fatal(err)
	}
	coll := b.DefaultCollection()
	var keys []string
	var want strings.Builder
	for i := range 300 {
		k := fmt.Sprintf("g%d", i)
		v := fmt.Sprintf("%05d%s", i, strings.Repeat("y", 8187))
		keys = append(keys, k)
		fmt.Fprintf(&want, "VALUE %s 0 8192\r\n%s\r\n", k, v)
		if _, err := coll.Upsert(ctx, k, []byte(v), nil); err != nil {
			eng.Close()
			t.Fatal(err)
		}
	}
	want.WriteString("END\r\n")
	a, _ := serveLoops(t, eng, b)
	a.send("gat 100 " + strings.Join(keys, " ") + "\r\n")
	readWithin(t, a, "gat of 300 values of 8 KiB", want.String())
	a.do("version\r\n", "VERSION "+DefaultVersion+"\r\n")
	if st := b.Stats(); st.CurrItems != 300 {
		t.Fatalf("curr_items %d after the gat, want 300", st.CurrItems)
	}
	d, err := coll.Get(ctx, keys[299])
	if err != nil || d.Expiration == 0 {
		t.Fatalf("the last key after the gat: %+v, %v; want an expiration", d, err)
	}
}

// TestLoopAnswersBehindACommitAreBounded: the answers a connection's
// commands give while a write before them waits for its commit (here
// errors for unknown commands, which need not wait) are held in order
// behind its reply, counted against the connection's output bound, so the
// loop stops running the connection's commands once 1 MiB of them waits
// and goes on when the commit lands: 200,000 answers (1.4 MB) after a set
// whose commit is held come whole and in order once it is let go.
func TestLoopAnswersBehindACommitAreBounded(t *testing.T) {
	ctx := context.Background()
	var holding atomic.Bool
	gate := make(chan struct{})
	entered := make(chan struct{}, 1)
	release := sync.OnceFunc(func() { holding.Store(false); close(gate) })
	t.Cleanup(release)
	eng, err := engine.Open(t.TempDir(), &engine.Options{NumPartitions: 64, CommitHook: func(string) {
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
	b, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "default", Type: engine.Couchbase, DurabilityMinLevel: engine.DurabilityPersistToMajority})
	if err != nil {
		eng.Close()
		t.Fatal(err)
	}
	a, other := serveLoops(t, eng, b)
	t.Cleanup(release)
	holding.Store(true)
	const n = 200_000
	var req strings.Builder
	req.WriteString("set a 0 0 1\r\nx\r\n")
	for range n {
		req.WriteString("bogus\r\n")
	}
	sent := make(chan error, 1)
	go func() { _, err := io.WriteString(a.nc, req.String()); sent <- err }()
	select {
	case <-entered:
	case <-time.After(heldAnswerTimeout):
		t.Fatal("the set's commit never started")
	}
	other.send("version\r\n")
	readWithin(t, other, "another connection while the first one's answers wait for a commit", "VERSION "+DefaultVersion+"\r\n")
	release()
	readWithin(t, a, "the set's answer and the 200,000 after it", "STORED\r\n"+strings.Repeat("ERROR\r\n", n))
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	a.do("get a\r\n", "VALUE a 0 1\r\nx\r\nEND\r\n")
}
