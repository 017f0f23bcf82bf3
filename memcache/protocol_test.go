package memcache

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// step is one request and its exact reply.
type step struct{ req, want string }

// runSteps runs steps in order on one fresh connection of a fresh server.
func runSteps(t *testing.T, steps []step) {
	t.Helper()
	f := newFixture(t, nil)
	c := f.dial(t)
	for _, s := range steps {
		c.do(s.req, s.want)
	}
}

func TestStorageCommands(t *testing.T) {
	tests := []struct {
		name  string
		steps []step
	}{
		{"set and get", []step{
			{"set k 5 0 3\r\nabc\r\n", "STORED\r\n"},
			{"get k\r\n", "VALUE k 5 3\r\nabc\r\nEND\r\n"},
		}},
		{"empty value", []step{
			{"set k 0 0 0\r\n\r\n", "STORED\r\n"},
			{"get k\r\n", "VALUE k 0 0\r\n\r\nEND\r\n"},
		}},
		{"binary value with CR LF inside", []step{
			{"set k 0 0 4\r\n\r\n\r\n\r\n", "STORED\r\n"},
			{"get k\r\n", "VALUE k 0 4\r\n\r\n\r\n\r\nEND\r\n"},
		}},
		{"largest flags", []step{
			{"set k 4294967295 0 1\r\nx\r\n", "STORED\r\n"},
			{"get k\r\n", "VALUE k 4294967295 1\r\nx\r\nEND\r\n"},
		}},
		{"flags wrap at 2^32 as memcached's strtoul", []step{
			{"set k 4294967296 0 1\r\nx\r\n", "STORED\r\n"},
			{"get k\r\n", "VALUE k 0 1\r\nx\r\nEND\r\n"},
		}},
		{"add", []step{
			{"add k 0 0 1\r\na\r\n", "STORED\r\n"},
			{"add k 0 0 1\r\nb\r\n", "NOT_STORED\r\n"},
			{"get k\r\n", "VALUE k 0 1\r\na\r\nEND\r\n"},
		}},
		{"replace", []step{
			{"replace k 0 0 1\r\na\r\n", "NOT_STORED\r\n"},
			{"set k 0 0 1\r\na\r\n", "STORED\r\n"},
			{"replace k 7 0 1\r\nb\r\n", "STORED\r\n"},
			{"get k\r\n", "VALUE k 7 1\r\nb\r\nEND\r\n"},
		}},
		{"append and prepend keep flags", []step{
			{"append k 0 0 1\r\na\r\n", "NOT_STORED\r\n"},
			{"prepend k 0 0 1\r\na\r\n", "NOT_STORED\r\n"},
			{"set k 9 0 2\r\nbb\r\n", "STORED\r\n"},
			{"append k 1 0 2\r\ncc\r\n", "STORED\r\n"},
			{"prepend k 2 0 2\r\naa\r\n", "STORED\r\n"},
			{"get k\r\n", "VALUE k 9 6\r\naabbcc\r\nEND\r\n"},
		}},
		{"delete", []step{
			{"delete k\r\n", "NOT_FOUND\r\n"},
			{"set k 0 0 1\r\na\r\n", "STORED\r\n"},
			{"delete k\r\n", "DELETED\r\n"},
			{"get k\r\n", "END\r\n"},
			{"set k 0 0 1\r\na\r\n", "STORED\r\n"},
			{"delete k 0\r\n", "DELETED\r\n"},
			{"delete k 1\r\n", "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n"},
			{"delete k x noreply\r\n", ""},
		}},
		{"multi get", []step{
			{"set a 1 0 1\r\nA\r\n", "STORED\r\n"},
			{"set c 3 0 3\r\nCCC\r\n", "STORED\r\n"},
			{"get a b c a\r\n", "VALUE a 1 1\r\nA\r\nVALUE c 3 3\r\nCCC\r\nVALUE a 1 1\r\nA\r\nEND\r\n"},
			{"get x y z\r\n", "END\r\n"},
			{"bget a\r\n", "VALUE a 1 1\r\nA\r\nEND\r\n"},
		}},
		{"multi get over 24 tokens", []step{
			{"set k20 0 0 2\r\n20\r\n", "STORED\r\n"},
			{"get " + keyList(30) + "\r\n", "VALUE k20 0 2\r\n20\r\nEND\r\n"},
		}},
		{"JSON and binary values", []step{
			{"set j 0 0 7\r\n{\"a\":1}\r\n", "STORED\r\n"},
			{"set b 0 0 3\r\n\x00\xff\x01\r\n", "STORED\r\n"},
			{"get j b\r\n", "VALUE j 0 7\r\n{\"a\":1}\r\nVALUE b 0 3\r\n\x00\xff\x01\r\nEND\r\n"},
		}},
		{"line ends in a bare LF", []step{
			{"set k 0 0 1\nx\r\n", "STORED\r\n"},
			{"get k\n", "VALUE k 0 1\r\nx\r\nEND\r\n"},
		}},
		{"extra spaces", []step{
			{"   set  k  0  0  1  \r\nx\r\n", "STORED\r\n"},
			{"get   k  \r\n", "VALUE k 0 1\r\nx\r\nEND\r\n"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runSteps(t, tt.steps) })
	}
}

func keyList(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "k%d ", i)
	}
	return b.String()
}

func TestNoreply(t *testing.T) {
	runSteps(t, []step{
		{"set k 1 0 1 noreply\r\na\r\n", ""},
		{"add k 0 0 1 noreply\r\nb\r\n", ""},
		{"replace k 2 0 1 noreply\r\nc\r\n", ""},
		{"append k 0 0 1 noreply\r\nd\r\n", ""},
		{"prepend k 0 0 1 noreply\r\ne\r\n", ""},
		{"get k\r\n", "VALUE k 2 3\r\necd\r\nEND\r\n"},
		{"cas k 0 0 1 1 noreply\r\nz\r\n", ""},
		{"touch k 100 noreply\r\n", ""},
		{"set n 0 0 1\r\n5\r\n", "STORED\r\n"},
		{"incr n 3 noreply\r\n", ""},
		{"decr n 1 noreply\r\n", ""},
		{"get n\r\n", "VALUE n 0 1\r\n7\r\nEND\r\n"},
		{"delete n noreply\r\n", ""},
		{"delete n 0 noreply\r\n", ""},
		{"get n\r\n", "END\r\n"},
		{"verbosity 1 noreply\r\n", ""},
		{"flush_all noreply\r\n", ""},
		{"flush_all 0 noreply\r\n", ""},
		{"get k\r\n", "END\r\n"},
		// noreply silences errors too, as memcached's out_string does.
		{"incr k x noreply\r\n", ""},
		{"touch k x noreply\r\n", ""},
		// A bad data chunk is silent too; the "\r\n" left over is an empty line.
		{"set k 0 0 1 noreply\r\nabc\r\n", "ERROR\r\n"},
	})
}

func TestBadCommandLines(t *testing.T) {
	long := strings.Repeat("k", 251)
	ok250 := strings.Repeat("k", 250)
	runSteps(t, []step{
		{"\r\n", "ERROR\r\n"},
		{"x\r\n", "ERROR\r\n"},
		{"bogus a b\r\n", "ERROR\r\n"},
		{"GET k\r\n", "ERROR\r\n"},
		{"get\r\n", "ERROR\r\n"},
		{"get \r\n", "ERROR\r\n"},
		{"set k 0 0\r\n", "ERROR\r\n"},
		{"set k 0 0 1 2 3\r\n", "ERROR\r\n"},
		{"cas k 0 0 1\r\n", "ERROR\r\n"},
		{"incr k\r\n", "ERROR\r\n"},
		{"touch k\r\n", "ERROR\r\n"},
		{"delete\r\n", "ERROR\r\n"},
		{"delete a b c d\r\n", "ERROR\r\n"},
		{"verbosity\r\n", "ERROR\r\n"},
		{"flush_all 1 2 3\r\n", "ERROR\r\n"},
		{"stats bogus\r\n", "ERROR\r\n"},
		{"stats detail\r\n", "CLIENT_ERROR usage: stats detail on|off|dump\r\n"},
		{"shutdown\r\n", "ERROR: shutdown not enabled\r\n"},
		{"mg k v\r\n", "ERROR\r\n"},
		// A bad storage line is not followed by swallowing: the data line is
		// read as a command, as memcached does.
		{"set k x 0 1\r\nz\r\n", "CLIENT_ERROR bad command line format\r\nERROR\r\n"},
		{"set k 0 x 1\r\nz\r\n", "CLIENT_ERROR bad command line format\r\nERROR\r\n"},
		{"set k 0 0 x\r\nz\r\n", "CLIENT_ERROR bad command line format\r\nERROR\r\n"},
		{"set k 0 0 -1\r\n", "CLIENT_ERROR bad command line format\r\n"},
		{"set k -1 0 1\r\nz\r\n", "CLIENT_ERROR bad command line format\r\nERROR\r\n"},
		{"set k 18446744073709551616 0 1\r\nz\r\n", "CLIENT_ERROR bad command line format\r\nERROR\r\n"},
		{"set k 0 0 2147483647\r\n", "CLIENT_ERROR bad command line format\r\n"},
		{"cas k 0 0 1 x\r\nz\r\n", "CLIENT_ERROR bad command line format\r\nERROR\r\n"},
		{"cas k 0 0 1 -1\r\nz\r\n", "CLIENT_ERROR bad command line format\r\nERROR\r\n"},
		{"set " + long + " 0 0 1\r\nz\r\n", "CLIENT_ERROR bad command line format\r\nERROR\r\n"},
		{"set " + ok250 + " 0 0 1\r\nz\r\n", "STORED\r\n"},
		{"get a " + long + " " + ok250 + "\r\n", "CLIENT_ERROR bad command line format\r\n"},
		{"get " + ok250 + "\r\n", "VALUE " + ok250 + " 0 1\r\nz\r\nEND\r\n"},
		{"delete " + long + "\r\n", "CLIENT_ERROR bad command line format\r\n"},
		{"incr k x\r\n", "CLIENT_ERROR invalid numeric delta argument\r\n"},
		{"incr k -1\r\n", "CLIENT_ERROR invalid numeric delta argument\r\n"},
		{"incr k 18446744073709551616\r\n", "CLIENT_ERROR invalid numeric delta argument\r\n"},
		{"touch k x\r\n", "CLIENT_ERROR invalid exptime argument\r\n"},
		{"gat x k\r\n", "CLIENT_ERROR invalid exptime argument\r\n"},
		{"gat 10\r\n", "END\r\n"},
		{"flush_all x\r\n", "CLIENT_ERROR invalid exptime argument\r\n"},
		{"verbosity x\r\n", "CLIENT_ERROR bad command line format\r\n"},
		// Bad data chunk: memcached reads exactly <bytes>+2 and goes on from there.
		{"set k 0 0 3\r\nabcde\r\n", "CLIENT_ERROR bad data chunk\r\nERROR\r\n"},
		{"set k 0 0 1\nx\nget k\n", "CLIENT_ERROR bad data chunk\r\nERROR\r\n"},
		// Keys Mayfly cannot store (control characters, invalid UTF-8): the
		// line is refused and, unlike memcached's own refusals, the data block
		// is swallowed.
		{"set a\tb 0 0 1\r\nz\r\n", "CLIENT_ERROR bad command line format\r\n"},
		{"set \xff 0 0 1\r\nz\r\n", "CLIENT_ERROR bad command line format\r\n"},
		{"get a\x01b\r\n", "CLIENT_ERROR bad command line format\r\n"},
	})
}

func TestCasFlow(t *testing.T) {
	f := newFixture(t, nil)
	c := f.dial(t)
	c.do("cas k 0 0 1 1\r\na\r\n", "NOT_FOUND\r\n")
	c.do("set k 3 0 1\r\na\r\n", "STORED\r\n")
	cas1 := getsCAS(t, c, "k", "VALUE k 3 1 ", "a")
	c.do(fmt.Sprintf("cas k 4 0 1 %d\r\nb\r\n", cas1+1), "EXISTS\r\n")
	c.do("cas k 4 0 1 0\r\nb\r\n", "EXISTS\r\n")
	c.do(fmt.Sprintf("cas k 4 0 1 %d\r\nb\r\n", cas1), "STORED\r\n")
	cas2 := getsCAS(t, c, "k", "VALUE k 4 1 ", "b")
	if cas2 == cas1 {
		t.Fatalf("cas unique did not change: %d", cas2)
	}
	c.do(fmt.Sprintf("cas k 4 0 1 %d\r\nc\r\n", cas1), "EXISTS\r\n")
	// Every mutation changes the cas unique: a cas taken before it fails.
	c.do("append k 0 0 1\r\nx\r\n", "STORED\r\n")
	c.do(fmt.Sprintf("cas k 4 0 1 %d\r\nc\r\n", cas2), "EXISTS\r\n")
	c.do("delete k\r\n", "DELETED\r\n")
	c.do(fmt.Sprintf("cas k 4 0 1 %d\r\nc\r\n", cas2), "NOT_FOUND\r\n")
	c.do("cas k 0 0 1 0\r\nb\r\n", "NOT_FOUND\r\n")
	st := c.stats()
	for name, want := range map[string]string{"cas_hits": "1", "cas_badval": "4", "cas_misses": "3"} {
		if st[name] != want {
			t.Errorf("%s = %s, want %s", name, st[name], want)
		}
	}
}

var valueLineRE = regexp.MustCompile(`^VALUE (\S+) (\d+) (\d+) (\d+)\r\n$`)

// getsCAS runs "gets key", checks the reply's prefix and value, and returns
// its cas unique.
func getsCAS(t *testing.T, c *client, key, prefix, value string) uint64 {
	t.Helper()
	c.send("gets " + key + "\r\n")
	l := c.line()
	if !strings.HasPrefix(l, prefix) || !valueLineRE.MatchString(l) {
		t.Fatalf("gets %s: got %q, want prefix %q", key, l, prefix)
	}
	cas, err := strconv.ParseUint(valueLineRE.FindStringSubmatch(l)[4], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.read(len(value) + 2 + 5); got != value+"\r\nEND\r\n" {
		t.Fatalf("gets %s: value %q", key, got)
	}
	return cas
}

func TestIncrDecr(t *testing.T) {
	runSteps(t, []step{
		{"incr n 1\r\n", "NOT_FOUND\r\n"},
		{"decr n 1\r\n", "NOT_FOUND\r\n"},
		{"set n 5 0 2\r\n10\r\n", "STORED\r\n"},
		{"incr n 18446744073709551615\r\n", "9\r\n"},  // wraps at 2^64
		{"get n\r\n", "VALUE n 5 2\r\n9 \r\nEND\r\n"}, // shorter: padded in place
		{"incr n 1\r\n", "10\r\n"},
		{"incr n +2\r\n", "12\r\n"},
		{"decr n 100\r\n", "0\r\n"}, // floors at 0
		{"get n\r\n", "VALUE n 5 2\r\n0 \r\nEND\r\n"},
		{"set n 0 0 3\r\n100\r\n", "STORED\r\n"},
		{"decr n 1\r\n", "99\r\n"},
		{"get n\r\n", "VALUE n 0 3\r\n99 \r\nEND\r\n"},
		{"incr n 1\r\n", "100\r\n"},
		{"incr n 900\r\n", "1000\r\n"},
		{"get n\r\n", "VALUE n 0 4\r\n1000\r\nEND\r\n"},
		{"set n 0 0 20\r\n18446744073709551615\r\n", "STORED\r\n"},
		{"incr n 2\r\n", "1\r\n"},
		{"get n\r\n", "VALUE n 0 20\r\n1                   \r\nEND\r\n"},
		{"set n 0 0 4\r\n 12 \r\n", "STORED\r\n"},
		{"incr n 1\r\n", "13\r\n"},
		{"set n 0 0 22\r\n0000000000000000000001\r\n", "STORED\r\n"},
		{"incr n 1\r\n", "2\r\n"},
		{"set n 0 0 3\r\n-12\r\n", "STORED\r\n"},
		{"incr n 1\r\n", "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n"},
		{"set n 0 0 3\r\n1a2\r\n", "STORED\r\n"},
		{"incr n 1\r\n", "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n"},
		{"set n 0 0 0\r\n\r\n", "STORED\r\n"},
		{"decr n 1\r\n", "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n"},
		{"set n 0 0 20\r\n18446744073709551616\r\n", "STORED\r\n"},
		{"incr n 1\r\n", "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n"},
		{"set n 0 0 5\r\nabcde\r\n", "STORED\r\n"},
		{"decr n 1\r\n", "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n"},
		{"set n 0 0 4\r\n7\x00ab\r\n", "STORED\r\n"}, // strtoull stops at the NUL
		{"incr n 1\r\n", "8\r\n"},
	})
}

func TestIncrKeepsFlagsAndExpiry(t *testing.T) {
	f := newFixture(t, nil)
	c := f.dial(t)
	c.do("set n 42 100 1\r\n1\r\n", "STORED\r\n")
	c.do("incr n 1\r\n", "2\r\n")
	c.do("append n 7 0 1\r\n0\r\n", "STORED\r\n")
	c.do("decr n 1\r\n", "19\r\n")
	d, err := f.bucket.DefaultCollection().Get(t.Context(), "n")
	if err != nil {
		t.Fatal(err)
	}
	if d.Flags != 42 || d.Expiration != t0+100 {
		t.Fatalf("flags %d expiration %d, want 42 and %d", d.Flags, d.Expiration, t0+100)
	}
	f.clock.Advance(100)
	c.do("incr n 1\r\n", "NOT_FOUND\r\n")
}

func TestIncrConcurrent(t *testing.T) {
	f := newFixture(t, nil)
	c := f.dial(t)
	c.do("set n 0 0 1\r\n0\r\n", "STORED\r\n")
	const workers, each = 8, 50
	done := make(chan struct{})
	for range workers {
		go func() {
			defer func() { done <- struct{}{} }()
			wc := f.dial(t)
			for range each {
				wc.send("incr n 1\r\n")
				wc.line()
			}
		}()
	}
	for range workers {
		<-done
	}
	want := strconv.Itoa(workers * each)
	c.do("get n\r\n", fmt.Sprintf("VALUE n 0 %d\r\n%s\r\nEND\r\n", len(want), want))
}

func TestTooLarge(t *testing.T) {
	f := newFixture(t, nil)
	c := f.dial(t)
	// memcached's sizes: header 56 + key + 1 + value + 2 (+4 for flags) <= 1 MiB.
	maxPlain := 1<<20 - itemHeaderLen - 1 - 1 - 2
	val := strings.Repeat("v", maxPlain)
	c.do(fmt.Sprintf("set k 0 0 %d\r\n%s\r\n", maxPlain, val), "STORED\r\n")
	c.do(fmt.Sprintf("set k 1 0 %d\r\n%s\r\n", maxPlain, val), "SERVER_ERROR object too large for cache\r\n")
	// The refused set took the old value with it, as memcached's does.
	c.do("get k\r\n", "END\r\n")
	c.do(fmt.Sprintf("set k 1 0 %d\r\n%s\r\n", maxPlain-4, val[4:]), "STORED\r\n")
	c.do("append k 0 0 1\r\nx\r\n", "NOT_STORED\r\n")
	// A huge declared length is swallowed whole, and the connection goes on.
	big := 5 << 20
	c.send(fmt.Sprintf("set h 0 0 %d\r\n", big))
	c.send(strings.Repeat("x", big) + "\r\n")
	if got := c.line(); got != "SERVER_ERROR object too large for cache\r\n" {
		t.Fatalf("got %q", got)
	}
	c.do("get h\r\n", "END\r\n")
	if got := c.stats()["store_too_large"]; got != "2" {
		t.Fatalf("store_too_large = %s, want 2", got)
	}
}

func TestVersionVerbosityQuit(t *testing.T) {
	f := newFixture(t, &Options{Version: "9.9.9-test"})
	c := f.dial(t)
	c.send("version\r\nverbosity 5\r\nstats settings\r\n")
	if got := c.line(); got != "VERSION 9.9.9-test\r\n" {
		t.Fatalf("version: %q", got)
	}
	if got := c.line(); got != "OK\r\n" {
		t.Fatalf("verbosity: %q", got)
	}
	found := false
	for l := c.line(); l != "END\r\n"; l = c.line() {
		if l == "STAT verbosity 2\r\n" {
			found = true
		}
	}
	if !found {
		t.Fatal("stats settings: verbosity not capped at 2")
	}
	c.send("set k 0 0 1\r\nx\r\nquit\r\nget k\r\n")
	c.expectClosed("STORED\r\n")
}

func TestHTTPRequestClosesConnection(t *testing.T) {
	f := newFixture(t, nil)
	c := f.dial(t)
	c.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	c.expectClosed("")
}

func TestStats(t *testing.T) {
	f := newFixture(t, nil)
	c := f.dial(t)
	c.do("set a 0 0 1\r\n1\r\n", "STORED\r\n")
	c.do("set b 0 1 1\r\n1\r\n", "STORED\r\n")
	c.do("get a b x\r\n", "VALUE a 0 1\r\n1\r\nVALUE b 0 1\r\n1\r\nEND\r\n")
	f.clock.Advance(1)
	c.do("get b\r\n", "END\r\n")
	c.do("touch a 10\r\n", "TOUCHED\r\n")
	c.do("touch x 10\r\n", "NOT_FOUND\r\n")
	c.do("gat 10 a x\r\n", "VALUE a 0 1\r\n1\r\nEND\r\n")
	c.do("incr a 1\r\n", "2\r\n")
	c.do("incr x 1\r\n", "NOT_FOUND\r\n")
	c.do("decr a 1\r\n", "1\r\n")
	c.do("decr x 1\r\n", "NOT_FOUND\r\n")
	c.do("delete a\r\n", "DELETED\r\n")
	c.do("delete a\r\n", "NOT_FOUND\r\n")
	c.do("flush_all\r\n", "OK\r\n")
	st := c.stats()
	want := map[string]string{
		"cmd_get": "4", "get_hits": "2", "get_misses": "2", "get_expired": "1",
		"cmd_set": "2", "total_items": "2", "cmd_touch": "4", "touch_hits": "2", "touch_misses": "2",
		"incr_hits": "1", "incr_misses": "1", "decr_hits": "1", "decr_misses": "1",
		"delete_hits": "1", "delete_misses": "1", "cmd_flush": "1",
		"curr_connections": "1", "total_connections": "2" /* the listener too */, "curr_items": "0",
		"ep_expired_access": "1", "ep_expired_pager": "0", "ep_expired": "1",
		"expired_unfetched": "0", "time": strconv.Itoa(t0 + 1), "uptime": "1",
		"version": DefaultVersion, "max_connections": "1024",
	}
	for k, v := range want {
		if st[k] != v {
			t.Errorf("stat %s = %q, want %q", k, st[k], v)
		}
	}
	for _, k := range []string{"pid", "bytes_read", "bytes_written", "cas_hits", "cas_misses", "cas_badval"} {
		if _, ok := st[k]; !ok {
			t.Errorf("stat %s missing", k)
		}
	}
	c.do("stats reset\r\n", "RESET\r\n")
	if got := c.stats()["cmd_get"]; got != "0" {
		t.Errorf("cmd_get after reset = %s", got)
	}
	c.do("stats items\r\n", "END\r\n")
	s := f.srv.Stats()
	if s.CurrConnections != 1 || s.CmdGet != 0 {
		t.Errorf("Stats() = %+v", s)
	}
}

// The counters memcached 1.6's "stats" lists for mechanisms Mayfly has not
// (a paused listener, its allocator, log watchers, the LRU crawler) are
// there, at 0, so that tools reading them find them.
func TestStatsOfMechanismsMayflyHasNot(t *testing.T) {
	f := newFixture(t, nil)
	c := f.dial(t)
	c.do("set a 0 0 1\r\n1\r\n", "STORED\r\n")
	st := c.stats()
	for _, k := range []string{
		"listen_disabled_num", "time_in_listen_disabled_us",
		"response_obj_oom", "read_buf_oom", "malloc_fails",
		"log_worker_dropped", "log_worker_written", "log_watcher_skipped", "log_watcher_sent",
		"unexpected_napi_ids", "round_robin_fallback",
		"crawler_reclaimed", "crawler_items_checked", "lrutail_reflocked",
		"moves_to_cold", "moves_to_warm", "moves_within_lru", "direct_reclaims", "lru_bumps_dropped",
	} {
		if v, ok := st[k]; !ok || v != "0" {
			t.Errorf("stat %s = %q (present %v), want 0", k, v, ok)
		}
	}
}

func TestAnswersBeforeAPartialRequest(t *testing.T) {
	f := newFixture(t, nil)
	c := f.dial(t)
	// The answer to a complete request goes out even while the next request
	// is only half sent (the client may wait for it before sending more).
	c.send("set a 0 0 1\r\nv\r\nget a\r\nget")
	if got, want := c.read(len("STORED\r\nVALUE a 0 1\r\nv\r\nEND\r\n")), "STORED\r\nVALUE a 0 1\r\nv\r\nEND\r\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	c.send(" a\r\nset b 0 0 3\r\nab")
	if got, want := c.read(len(present)), "VALUE a 0 1\r\nv\r\nEND\r\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	c.do("c\r\n", "STORED\r\n")
}
