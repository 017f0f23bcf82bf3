package memcache

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
)

// newLevelFixture serves a couchbase bucket with durabilityMinLevel min, on
// an engine whose flusher gathers writes acknowledged from memory for an
// hour: such a write stays queued until something makes the flusher
// commit, so whether a write was on disk when answered shows without timing
// anything.
func newLevelFixture(t *testing.T, min engine.Durability, opts *Options) *fixture {
	t.Helper()
	clock := engine.NewFakeClock(t0)
	eng, err := engine.Open(t.TempDir(), &engine.Options{Clock: clock, NumPartitions: 16, NoSync: true, FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	b, err := eng.CreateBucket(context.Background(), engine.BucketSettings{Name: "default", DurabilityMinLevel: min})
	if err != nil {
		t.Fatal(err)
	}
	srv, addr, done := serve(t, b, opts)
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := <-done; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
		if err := eng.Check(context.Background()); err != nil {
			t.Errorf("engine.Check: %v", err)
		}
		eng.Close()
		checkNoLeaks(t)
	})
	return &fixture{srv: srv, addr: addr, clock: clock, bucket: b}
}

func (f *fixture) queued() bool {
	st := f.bucket.Stats()
	return st.QueueSize+st.FlusherTodo > 0
}

// connLevelCases is, for each bucket minimum and connection level, whether
// a write is on disk when answered, written out rather than computed with
// engine.Durability.Max and Persists, so that a Max that lowered a level
// fails the test.
var connLevelCases = []struct {
	min, conn engine.Durability
	persisted bool
}{
	{"none", "", false},
	{"none", "none", false},
	{"none", "majority", false},
	{"none", "majorityAndPersistActive", true},
	{"none", "persistToMajority", true},
	{"majority", "", false},
	{"majority", "none", false},
	{"majority", "majority", false},
	{"majority", "majorityAndPersistActive", true},
	{"majority", "persistToMajority", true},
	{"majorityAndPersistActive", "", true},
	{"majorityAndPersistActive", "none", true},
	{"majorityAndPersistActive", "majority", true},
	{"majorityAndPersistActive", "majorityAndPersistActive", true},
	{"majorityAndPersistActive", "persistToMajority", true},
	{"persistToMajority", "", true},
	{"persistToMajority", "none", true},
	{"persistToMajority", "majority", true},
	{"persistToMajority", "majorityAndPersistActive", true},
	{"persistToMajority", "persistToMajority", true},
}

// The connection's level (Options.Durability, mayfly serve
// --memcached-durability) raises the bucket's minimum, never lowers it: a
// write is on disk when answered exactly as connLevelCases says.
func TestDurabilityConnectionLevel(t *testing.T) {
	for _, tc := range connLevelCases {
		t.Run(string(tc.min)+"/"+string(tc.conn), func(t *testing.T) { testConnectionLevel(t, tc.min, tc.conn, tc.persisted) })
	}
}

// A port run with --memcached-durability none (Options.Durability none) in
// front of a persistToMajority bucket still answers each write only once
// its commit is on disk, with either driver, one command at a time or
// pipelined with noreply writes: the bucket's minimum is not lowered by
// the port's level. Whether the flusher still holds a write when its
// answer arrives (it would hold one acknowledged from memory for an hour)
// tells the two apart.
func TestDurabilityNoneConnectionOnPersistingBucket(t *testing.T) {
	for _, io := range []IOModel{IOEventLoop, IOGoroutines} {
		t.Run(string(io), func(t *testing.T) {
			if io == IOEventLoop && DefaultIO != IOEventLoop {
				t.Skip("no event loops on this system")
			}
			f := newLevelFixture(t, engine.DurabilityPersistToMajority, &Options{Durability: engine.DurabilityNone, IO: io})
			c := f.dial(t)
			for _, w := range []struct{ cmd, reply string }{
				{"set k 0 0 1\r\n5\r\n", "STORED\r\n"},
				{"add k2 0 0 1\r\n7\r\n", "STORED\r\n"},
				{"append k 0 0 1\r\n0\r\n", "STORED\r\n"},
				{"incr k 1\r\n", "51\r\n"},
				{"touch k 100\r\n", "TOUCHED\r\n"},
				{"gat 200 k\r\n", "VALUE k 0 2\r\n51\r\nEND\r\n"},
				{"delete k\r\n", "DELETED\r\n"},
			} {
				c.do(w.cmd, w.reply)
				if f.queued() {
					t.Errorf("%q on a persistToMajority bucket through a port at none: answered before its commit", w.cmd)
				}
			}
			// Pipelined: noreply sets, then one that answers, then a get.
			// The set's answer comes once its own write is on disk (the
			// noreply writes to other keys may still be running:
			// DIFFERENCES.md, "Pipelined writes share commits"); the get
			// runs once every earlier write of the connection is done, and
			// a write at persistToMajority is done once on disk.
			var req strings.Builder
			for i := range 50 {
				fmt.Fprintf(&req, "set p%d 0 0 1 noreply\r\n%d\r\n", i, i%10)
			}
			req.WriteString("set last 0 0 1\r\nx\r\n")
			c.send(req.String())
			if got := c.line(); got != "STORED\r\n" {
				t.Fatalf("pipelined set: %q", got)
			}
			c.do("get p49\r\n", "VALUE p49 0 1\r\n9\r\nEND\r\n")
			if f.queued() {
				t.Error("pipelined writes on a persistToMajority bucket through a port at none: answered before their commit")
			}
			if st := c.stats(); st["ep_commit_num"] == "0" {
				t.Error("ep_commit_num 0 after writes that persist")
			}
		})
	}
}

func testConnectionLevel(t *testing.T, min, conn engine.Durability, want bool) {
	f := newLevelFixture(t, min, &Options{Durability: conn})
	c := f.dial(t)
	for _, w := range []struct{ cmd, reply string }{
		{"set k 0 0 1\r\n5\r\n", "STORED\r\n"},
		{"append k 0 0 1\r\n0\r\n", "STORED\r\n"},
		{"incr k 1\r\n", "51\r\n"},
		{"touch k 100\r\n", "TOUCHED\r\n"},
		{"gat 200 k\r\n", "VALUE k 0 2\r\n51\r\nEND\r\n"},
		{"delete k\r\n", "DELETED\r\n"},
	} {
		c.do(w.cmd, w.reply)
		if got := !f.queued(); got != want {
			t.Errorf("min %s, connection %q, %q: on disk when answered %v, want %v", min, conn, w.cmd, got, want)
		}
		if err := f.bucket.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

func TestDurabilityOptionRefused(t *testing.T) {
	eng, err := engine.Open(t.TempDir(), &engine.Options{NumPartitions: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	b, err := eng.CreateBucket(context.Background(), engine.BucketSettings{Name: "b", Type: engine.Ephemeral})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(b, &Options{Durability: "safe"}); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("New with Durability safe: %v, want ErrInvalidOptions", err)
	}
	// An ephemeral bucket keeps nothing on disk: a level that persists
	// would fail every write (engine.ErrInvalidDurability), so New refuses
	// it; before, every write was answered as if on disk.
	for _, d := range []engine.Durability{engine.DurabilityPersistToMajority, engine.DurabilityMajorityAndPersistActive} {
		if _, err := New(b, &Options{Durability: d}); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("New with Durability %s for an ephemeral bucket: %v, want ErrInvalidOptions", d, err)
		}
	}
	srv, err := New(b, &Options{Durability: engine.DurabilityMajority})
	if err != nil {
		t.Fatalf("New with Durability majority for an ephemeral bucket: %v", err)
	}
	srv.Close()
	// A memcached bucket takes none alone, as its durabilityMinLevel:
	// majority would fail every write (engine.ErrDurabilityNotSupported).
	mc, err := eng.CreateBucket(context.Background(), engine.BucketSettings{Name: "mc", Type: engine.Memcached})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(mc, &Options{Durability: engine.DurabilityMajority}); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("New with Durability majority for a memcached bucket: %v, want ErrInvalidOptions", err)
	}
	if srv, err = New(mc, &Options{Durability: engine.DurabilityNone}); err != nil {
		t.Fatalf("New with Durability none for a memcached bucket: %v", err)
	}
	srv.Close()
}

// At none, pipelined writes, noreply writes and reads of one connection keep
// their order and answers, reads see the writes before them at once, and
// nothing waits for the disk (the flusher would wait an hour: a write that
// waited for it would hang the test).
func TestDurabilityNonePipelinedAndNoreply(t *testing.T) {
	f := newLevelFixture(t, engine.DurabilityNone, nil)
	c := f.dial(t)
	var req strings.Builder
	for i := range 100 {
		fmt.Fprintf(&req, "set k%d 0 0 1 noreply\r\n%d\r\n", i%7, i%10)
		fmt.Fprintf(&req, "get k%d\r\n", i%7)
		fmt.Fprintf(&req, "append k%d 0 0 1\r\nx\r\n", i%7)
		fmt.Fprintf(&req, "gets k%d\r\n", i%7) // its CAS varies: checked line by line
	}
	c.send(req.String())
	for i := range 100 {
		got := c.read(len(fmt.Sprintf("VALUE k%d 0 1\r\n%d\r\nEND\r\nSTORED\r\n", i%7, i%10)))
		if w := fmt.Sprintf("VALUE k%d 0 1\r\n%d\r\nEND\r\nSTORED\r\n", i%7, i%10); got != w {
			t.Fatalf("command %d: got %q, want %q", i, got, w)
		}
		l := c.line()
		if !strings.HasPrefix(l, fmt.Sprintf("VALUE k%d 0 2 ", i%7)) {
			t.Fatalf("gets %d: %q", i, l)
		}
		if v := c.line(); v != fmt.Sprintf("%dx\r\n", i%10) {
			t.Fatalf("gets %d value: %q", i, v)
		}
		if e := c.line(); e != "END\r\n" {
			t.Fatalf("gets %d end: %q", i, e)
		}
	}
	if !f.queued() {
		t.Error("writes at none were committed before the flush interval: something waited for the disk")
	}
}

// At the durable default, a connection's pipelined writes share commits
// and are answered in order, and a read after noreply writes sees them.
func TestDurabilityDurablePipelined(t *testing.T) {
	f := newLevelFixture(t, "", nil)
	c := f.dial(t)
	var req, want strings.Builder
	const n = 200
	for i := range n {
		fmt.Fprintf(&req, "set k%d 0 0 %d\r\n%d\r\n", i, len(fmt.Sprint(i)), i)
		want.WriteString("STORED\r\n")
		fmt.Fprintf(&req, "set q%d 0 0 1 noreply\r\nq\r\n", i)
	}
	req.WriteString("get k0 q0 k199 q199\r\n")
	want.WriteString("VALUE k0 0 1\r\n0\r\nVALUE q0 0 1\r\nq\r\nVALUE k199 0 3\r\n199\r\nVALUE q199 0 1\r\nq\r\nEND\r\n")
	c.send(req.String())
	if got := c.read(len(want.String())); got != want.String() {
		t.Fatalf("pipelined replies:\n got %q\nwant %q", got, want.String())
	}
	if f.queued() {
		t.Error("durable writes answered before their commit")
	}
	st := c.stats()
	for _, name := range []string{"ep_queue_size", "ep_flusher_todo", "ep_commit_num", "ep_commit_time", "ep_commit_time_total"} {
		if _, ok := st[name]; !ok {
			t.Errorf("stats lacks %s", name)
		}
	}
	if st["ep_commit_num"] == "0" {
		t.Error("ep_commit_num 0 after durable writes")
	}
}
