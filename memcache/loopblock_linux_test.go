//go:build linux

package memcache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strconv"
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
const heldAnswerTimeout = time.Minute

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
	eng, b := loopBucket(t, &engine.Options{NumPartitions: 64}, engine.DurabilityPersistToMajority)
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
	g := newCommitGate(t)
	eng, b := loopBucket(t, &engine.Options{NumPartitions: 64, CommitHook: g.hook}, engine.DurabilityPersistToMajority)
	a, other := serveLoops(t, eng, b)
	t.Cleanup(g.release)
	g.holding.Store(true)
	const n = 200_000
	var req strings.Builder
	req.WriteString("set a 0 0 1\r\nx\r\n")
	for range n {
		req.WriteString("bogus\r\n")
	}
	sent := make(chan error, 1)
	go func() { _, err := io.WriteString(a.nc, req.String()); sent <- err }()
	loopGoesOn(t, g.entered, "the set's commit never started", other, "another connection while the first one's answers wait for a commit")
	g.release()
	readWithin(t, a, "the set's answer and the 200,000 after it", "STORED\r\n"+strings.Repeat("ERROR\r\n", n))
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	a.do("get a\r\n", "VALUE a 0 1\r\nx\r\nEND\r\n")
}

// storeGate holds the engine's read of one key from the store (FetchHook)
// until let go.
type storeGate struct {
	key     string
	entered chan struct{}
	hold    chan struct{}
	release func()
}

func newStoreGate(key string) *storeGate {
	g := &storeGate{key: key, entered: make(chan struct{}, 1), hold: make(chan struct{})}
	g.release = sync.OnceFunc(func() { close(g.hold) })
	return g
}

// loopStoreCase is a command whose key needs the store: the value ejected
// (valueOnly) or the whole item out of memory (fullEviction).
type loopStoreCase struct {
	name string
	// cmd is the command on key k; lines is how many lines its answer has.
	cmd   func(k string) string
	lines int
	// want is its answer, given key k's value before (v) and its document
	// after the command.
	want func(k, v string, after *engine.Document) string
	// check, when set, checks the document after (nil once deleted).
	check func(t *testing.T, v string, after *engine.Document)
	// counts are the stats the command adds one to (once, though it ran
	// twice: from memory, then where it may read the store).
	counts []string
}

// TestLoopCommandsNeedingTheStoreDoNotHoldTheLoop: every command that
// reads an item before it acts (gat, gats, touch, append, prepend, incr,
// decr, cas) on a key whose value was ejected from memory (valueOnly), and
// on fullEviction every write whose item is out of memory whole (set, add,
// replace, delete and cas too: they need its metadata), reads the store on
// a goroutine of its own, not on the event loop, at durabilityMinLevel
// none (where writes run on the loop): while its store read is held,
// another connection of the same loop is answered, and the first
// connection's answer and the command after it come once the read is let
// go, in order, the command done. On the code before, each hangs: the
// loop itself waited for the read.
func TestLoopCommandsNeedingTheStoreDoNotHoldTheLoop(t *testing.T) {
	numeric := func(i int) string { return fmt.Sprintf("%05d%s", i, strings.Repeat(" ", 4091)) }
	value := func(k, v string, after *engine.Document) string {
		return fmt.Sprintf("VALUE %s 0 %d\r\n%s\r\nEND\r\n", k, len(v), v)
	}
	reply := func(r string) func(k, v string, after *engine.Document) string {
		return func(string, string, *engine.Document) string { return r + "\r\n" }
	}
	expires := func(t *testing.T, v string, after *engine.Document) {
		if after == nil || after.Expiration == 0 || string(after.Value) != v {
			t.Fatalf("after the command: %+v; want the value unchanged and an expiration", after)
		}
	}
	becomes := func(f func(v string) string) func(t *testing.T, v string, after *engine.Document) {
		return func(t *testing.T, v string, after *engine.Document) {
			if after == nil || string(after.Value) != f(v) {
				t.Fatalf("after the command: %+v; want the value %.20q...", after, f(v))
			}
		}
	}
	same := becomes(func(v string) string { return v })
	added := func(n uint64) func(v string) string {
		return func(v string) string {
			old, _ := parseIncrValue([]byte(v))
			d := strconv.FormatUint(old+n, 10)
			return d + strings.Repeat(" ", len(v)-len(d))
		}
	}
	valueOnly := []loopStoreCase{
		{name: "gat", cmd: func(k string) string { return "gat 100 " + k + "\r\n" }, lines: 3, want: value, check: expires, counts: []string{"cmd_touch", "touch_hits"}},
		{name: "gats", cmd: func(k string) string { return "gats 100 " + k + "\r\n" }, lines: 3,
			want: func(k, v string, after *engine.Document) string {
				return fmt.Sprintf("VALUE %s 0 %d %d\r\n%s\r\nEND\r\n", k, len(v), after.CAS, v)
			}, check: expires, counts: []string{"cmd_touch", "touch_hits"}},
		{name: "touch", cmd: func(k string) string { return "touch " + k + " 100\r\n" }, lines: 1, want: reply("TOUCHED"), check: expires, counts: []string{"cmd_touch", "touch_hits"}},
		{name: "append", cmd: func(k string) string { return "append " + k + " 0 0 2\r\nab\r\n" }, lines: 1, want: reply("STORED"),
			check: becomes(func(v string) string { return v + "ab" }), counts: []string{"cmd_set"}},
		{name: "prepend", cmd: func(k string) string { return "prepend " + k + " 0 0 2\r\nab\r\n" }, lines: 1, want: reply("STORED"),
			check: becomes(func(v string) string { return "ab" + v }), counts: []string{"cmd_set"}},
		{name: "incr", cmd: func(k string) string { return "incr " + k + " 5\r\n" }, lines: 1,
			want:  func(k, v string, after *engine.Document) string { return strings.TrimRight(added(5)(v), " ") + "\r\n" },
			check: becomes(added(5)), counts: []string{"incr_hits"}},
		{name: "decr", cmd: func(k string) string { return "decr " + k + " 0\r\n" }, lines: 1,
			want:  func(k, v string, after *engine.Document) string { return strings.TrimRight(added(0)(v), " ") + "\r\n" },
			check: becomes(added(0)), counts: []string{"decr_hits"}},
		{name: "cas 0", cmd: func(k string) string { return "cas " + k + " 0 0 1 0\r\nx\r\n" }, lines: 1, want: reply("EXISTS"), check: same, counts: []string{"cmd_set", "cas_badval"}},
	}
	fullEviction := append(slices.Clone(valueOnly),
		loopStoreCase{name: "set", cmd: func(k string) string { return "set " + k + " 0 0 3\r\nnew\r\n" }, lines: 1, want: reply("STORED"),
			check: becomes(func(string) string { return "new" }), counts: []string{"cmd_set"}},
		loopStoreCase{name: "add", cmd: func(k string) string { return "add " + k + " 0 0 3\r\nnew\r\n" }, lines: 1, want: reply("NOT_STORED"), check: same, counts: []string{"cmd_set"}},
		loopStoreCase{name: "replace", cmd: func(k string) string { return "replace " + k + " 0 0 3\r\nnew\r\n" }, lines: 1, want: reply("STORED"),
			check: becomes(func(string) string { return "new" }), counts: []string{"cmd_set"}},
		loopStoreCase{name: "cas", cmd: func(k string) string { return "cas " + k + " 0 0 3 12345\r\nnew\r\n" }, lines: 1, want: reply("EXISTS"), check: same, counts: []string{"cmd_set", "cas_badval"}},
		loopStoreCase{name: "delete", cmd: func(k string) string { return "delete " + k + "\r\n" }, lines: 1, want: reply("DELETED"), counts: []string{"delete_hits"}},
	)
	for _, tc := range []struct {
		policy engine.EvictionPolicy
		cases  []loopStoreCase
	}{{engine.ValueOnly, valueOnly}, {engine.FullEviction, fullEviction}} {
		t.Run(string(tc.policy), func(t *testing.T) {
			ctx := context.Background()
			var gate atomic.Pointer[storeGate]
			eng, err := engine.Open(t.TempDir(), &engine.Options{NumPartitions: 64, FetchHook: func(_, key string) {
				if g := gate.Load(); g != nil && key == g.key {
					select {
					case g.entered <- struct{}{}:
					default:
					}
					<-g.hold
				}
			}})
			if err != nil {
				t.Fatal(err)
			}
			b, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "default", Type: engine.Couchbase, RAMQuotaMB: 1,
				EvictionPolicy: tc.policy, DurabilityMinLevel: engine.DurabilityNone})
			if err != nil {
				eng.Close()
				t.Fatal(err)
			}
			coll := b.DefaultCollection()
			const n = 1000
			for i := range n {
				// Each write waits for disk, so that its value may leave memory.
				if _, err := coll.Upsert(ctx, fmt.Sprintf("k%d", i), []byte(numeric(i)), &engine.WriteOptions{Durability: engine.DurabilityPersistToMajority}); err != nil {
					eng.Close()
					t.Fatal(err)
				}
			}
			a, other := serveLoops(t, eng, b)
			// Let any held read go before the server's close, which waits for
			// the loop.
			t.Cleanup(func() {
				if g := gate.Load(); g != nil {
					g.release()
				}
			})
			next := n - 1 // keys are taken from the oldest written down
			out := func() (string, int) {
				for ; next >= 0; next-- {
					k := fmt.Sprintf("k%d", next)
					if _, err := coll.GetResident(ctx, k); errors.Is(err, engine.ErrWouldBlock) {
						i := next
						next--
						return k, i
					}
				}
				t.Fatalf("no key of %d left whose read needs the store", n)
				return "", 0
			}
			before := other.stats()
			wantCounts := map[string]int{}
			for _, c := range tc.cases {
				for _, name := range c.counts {
					wantCounts[name]++
				}
				k, i := out()
				v := numeric(i)
				g := newStoreGate(k)
				gate.Store(g)
				a.send(c.cmd(k) + "version\r\n")
				select {
				case <-g.entered:
				case <-time.After(heldAnswerTimeout):
					t.Fatalf("%s: the command never read the store", c.name)
				}
				// fullEviction's read holds the key's partition: another
				// command that needs no partition shows the loop goes on.
				other.send("version\r\n")
				readWithin(t, other, c.name+": another connection while the store read is held", "VERSION "+DefaultVersion+"\r\n")
				g.release()
				var got strings.Builder
				a.nc.SetReadDeadline(time.Now().Add(heldAnswerTimeout)) // wall clock: catches a hang only
				for range c.lines + 1 {
					got.WriteString(a.line())
				}
				a.nc.SetReadDeadline(time.Time{})
				after, err := coll.Get(ctx, k)
				if err != nil && !errors.Is(err, engine.ErrNotFound) {
					t.Fatal(err)
				}
				if err != nil {
					after = nil
				}
				if want := c.want(k, v, after) + "VERSION " + DefaultVersion + "\r\n"; got.String() != want {
					t.Fatalf("%s: answer %.120q, want %.120q", c.name, got.String(), want)
				}
				if c.check != nil {
					c.check(t, v, after)
				} else if after != nil {
					t.Fatalf("%s: %s still there: %+v", c.name, k, after)
				}
			}
			stats := other.stats()
			for name, n := range wantCounts {
				b, _ := strconv.Atoi(before[name])
				if got, _ := strconv.Atoi(stats[name]); got-b != n {
					t.Errorf("%s went from %d to %d, want +%d", name, b, got, n)
				}
			}
		})
	}
}

// commitGate holds an engine's commits (hook, its CommitHook) while holding
// is set: entered is signalled as one is held, and release lets every held
// one go (once; the test's end does too).
type commitGate struct {
	holding atomic.Bool
	gate    chan struct{}
	entered chan struct{}
	release func()
}

func newCommitGate(t *testing.T) *commitGate {
	g := &commitGate{gate: make(chan struct{}), entered: make(chan struct{}, 1)}
	g.release = sync.OnceFunc(func() { g.holding.Store(false); close(g.gate) })
	t.Cleanup(g.release)
	return g
}

func (g *commitGate) hook(string) {
	if g.holding.Load() {
		select {
		case g.entered <- struct{}{}:
		default:
		}
		<-g.gate
	}
}

// loopBucket opens an engine with opts and its bucket "default" at
// durability level, for serveLoops.
func loopBucket(t *testing.T, opts *engine.Options, level engine.Durability) (*engine.Engine, *engine.Bucket) {
	t.Helper()
	eng, err := engine.Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := eng.CreateBucket(context.Background(), engine.BucketSettings{Name: "default", Type: engine.Couchbase, DurabilityMinLevel: level})
	if err != nil {
		eng.Close()
		t.Fatal(err)
	}
	return eng, b
}

// loopGoesOn waits for entered (a command of one connection is held: if it
// never comes, the test fails with notHeld), then shows that other, a
// connection of the same event loop, is still answered.
func loopGoesOn(t *testing.T, entered <-chan struct{}, notHeld string, other *client, what string) {
	t.Helper()
	select {
	case <-entered:
	case <-time.After(heldAnswerTimeout):
		t.Fatal(notHeld)
	}
	other.send("version\r\n")
	readWithin(t, other, what, "VERSION "+DefaultVersion+"\r\n")
}
