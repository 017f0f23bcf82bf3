package memcache

import (
	"fmt"
	"strconv"
	"testing"
	"time"
)

// present and absent are the replies of "get k" for the value "v".
const (
	present = "VALUE k 0 1\r\nv\r\nEND\r\n"
	absent  = "END\r\n"
)

func TestExpiryRules(t *testing.T) {
	tests := []struct {
		name    string
		exptime string
		// alive is how many seconds after the set the item is still there
		// (-1: expired at once); gone is when it is gone (0: never).
		alive, gone int64
	}{
		{"zero never expires", "0", 10 * 365 * 86400, 0},
		{"relative", "10", 9, 10},
		{"one second", "1", 0, 1},
		{"largest relative (30 days)", "2592000", 2592000 - 1, 2592000},
		{"30 days plus one is absolute, in 1970", "2592001", -1, 0},
		{"absolute future", strconv.Itoa(t0 + 100), 99, 100},
		{"absolute now", strconv.Itoa(t0), -1, 0},
		{"absolute past", strconv.Itoa(t0 - 1), -1, 0},
		{"negative", "-1", -1, 0},
		{"very negative", "-2147483648", -1, 0},
		{"2^31 truncates to negative, as memcached", "2147483648", -1, 0},
		{"below int32 truncates to 2038", "-2147483649", 2147483647 - t0 - 1, 2147483647 - t0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, nil)
			c := f.dial(t)
			c.do("set k 0 "+tt.exptime+" 1\r\nv\r\n", "STORED\r\n")
			if tt.alive < 0 {
				c.do("get k\r\n", absent)
				c.do("add k 0 0 1\r\nv\r\n", "STORED\r\n") // an expired item does not block add
				return
			}
			f.clock.Advance(tt.alive)
			c.do("get k\r\n", present)
			if tt.gone == 0 {
				return
			}
			f.clock.Set(t0 + tt.gone)
			c.do("get k\r\n", absent)
		})
	}
}

func TestExpiredItemIsGoneForEveryCommand(t *testing.T) {
	steps := []step{
		{"replace k 0 0 1\r\nx\r\n", "NOT_STORED\r\n"},
		{"append k 0 0 1\r\nx\r\n", "NOT_STORED\r\n"},
		{"prepend k 0 0 1\r\nx\r\n", "NOT_STORED\r\n"},
		{"incr k 1\r\n", "NOT_FOUND\r\n"},
		{"decr k 1\r\n", "NOT_FOUND\r\n"},
		{"touch k 100\r\n", "NOT_FOUND\r\n"},
		{"gat 100 k\r\n", "END\r\n"},
		{"gets k\r\n", "END\r\n"},
		{"delete k\r\n", "NOT_FOUND\r\n"},
		{"cas k 0 0 1 1\r\nx\r\n", "NOT_FOUND\r\n"},
		{"add k 0 0 1\r\nx\r\n", "STORED\r\n"},
	}
	for _, s := range steps {
		t.Run(s.req, func(t *testing.T) {
			f := newFixture(t, nil)
			c := f.dial(t)
			c.do("set k 0 5 1\r\n7\r\n", "STORED\r\n")
			f.clock.Advance(5)
			c.do(s.req, s.want)
		})
	}
}

func TestTouch(t *testing.T) {
	f := newFixture(t, nil)
	c := f.dial(t)
	c.do("touch k 10\r\n", "NOT_FOUND\r\n")
	c.do("set k 0 10 1\r\nv\r\n", "STORED\r\n")
	f.clock.Advance(5)
	c.do("touch k 20\r\n", "TOUCHED\r\n") // replaces the expiry: now t0+25
	f.clock.Advance(15)
	c.do("get k\r\n", present)
	f.clock.Advance(4)
	c.do("get k\r\n", present)
	f.clock.Advance(1)
	c.do("get k\r\n", absent)

	c.do("set k 0 10 1\r\nv\r\n", "STORED\r\n")
	c.do("touch k 0\r\n", "TOUCHED\r\n") // no expiry any more
	f.clock.Advance(1000)
	c.do("get k\r\n", present)
	c.do(fmt.Sprintf("touch k %d\r\n", f.clock.Now()+50), "TOUCHED\r\n") // absolute
	f.clock.Advance(49)
	c.do("get k\r\n", present)
	f.clock.Advance(1)
	c.do("get k\r\n", absent)

	c.do("set k 0 0 1\r\nv\r\n", "STORED\r\n")
	c.do("touch k -1\r\n", "TOUCHED\r\n")
	c.do("get k\r\n", absent)
	c.do("set k 0 0 1\r\nv\r\n", "STORED\r\n")
	c.do(fmt.Sprintf("touch k %d\r\n", t0), "TOUCHED\r\n") // absolute, already past
	c.do("get k\r\n", absent)
}

func TestGatAndGats(t *testing.T) {
	f := newFixture(t, nil)
	c := f.dial(t)
	c.do("gat 10 k\r\n", "END\r\n")
	c.do("set k 3 10 1\r\nv\r\n", "STORED\r\n")
	c.do("set j 4 0 2\r\nvv\r\n", "STORED\r\n")
	c.do("gat 100 k j nope\r\n", "VALUE k 3 1\r\nv\r\nVALUE j 4 2\r\nvv\r\nEND\r\n")
	f.clock.Advance(99)
	c.do("get k j\r\n", "VALUE k 3 1\r\nv\r\nVALUE j 4 2\r\nvv\r\nEND\r\n")
	f.clock.Advance(1)
	c.do("get k j\r\n", absent)

	c.do("set k 0 10 1\r\nv\r\n", "STORED\r\n")
	before := getsCAS(t, c, "k", "VALUE k 0 1 ", "v")
	c.send("gats 0 k\r\n")
	l := c.line()
	m := valueLineRE.FindStringSubmatch(l)
	if m == nil || m[1] != "k" {
		t.Fatalf("gats: %q", l)
	}
	if got := c.read(8); got != "v\r\nEND\r\n" {
		t.Fatalf("gats value: %q", got)
	}
	after, _ := strconv.ParseUint(m[4], 10, 64)
	// Deliberate difference: a touch is an engine mutation, so the CAS moves.
	if after == before {
		t.Fatalf("gats: cas unique %d unchanged; Mayfly's touch is a mutation", after)
	}
	if got := getsCAS(t, c, "k", "VALUE k 0 1 ", "v"); got != after {
		t.Fatalf("gets after gats: cas %d, want %d", got, after)
	}
	f.clock.Advance(1 << 30 / 2) // gats 0 removed the expiry
	c.do("get k\r\n", present)
	c.do("gat -1 k\r\n", present) // answered, then expired at once
	c.do("get k\r\n", absent)
}

func TestFlushAll(t *testing.T) {
	f := newFixture(t, nil)
	c := f.dial(t)
	c.do("set k 0 0 1\r\nv\r\n", "STORED\r\n")
	c.do("set j 0 0 1\r\nv\r\n", "STORED\r\n")
	c.do("flush_all\r\n", "OK\r\n")
	c.do("get k j\r\n", absent)
	c.do("add k 0 0 1\r\nv\r\n", "STORED\r\n")
	c.do("flush_all 0\r\n", "OK\r\n")
	c.do("get k\r\n", absent)
	c.do("set k 0 0 1\r\nv\r\n", "STORED\r\n")
	c.do("flush_all 1\r\n", "OK\r\n") // memcached: a delay of 1 is at once
	c.do("get k\r\n", absent)
	c.do("set k 0 0 1\r\nv\r\n", "STORED\r\n")
	c.do("flush_all -5\r\n", "OK\r\n") // negative: at once
	c.do("get k\r\n", absent)
}

func TestFlushAllDelayed(t *testing.T) {
	f := newFixture(t, nil)
	c := f.dial(t)
	c.do("set k 0 0 1\r\nv\r\n", "STORED\r\n")
	c.do("flush_all 10\r\n", "OK\r\n") // takes effect at t0+9, as memcached's realtime(10)-1
	f.clock.Advance(8)
	c.do("get k\r\n", present)
	c.do("set j 0 0 1\r\nv\r\n", "STORED\r\n") // stored before the moment: flushed too
	f.clock.Advance(1)
	c.do("get k j\r\n", absent)
	c.do("set k 0 0 1\r\nv\r\n", "STORED\r\n") // stored after: stays
	f.clock.Advance(100)
	c.do("get k\r\n", present)
	if n := f.bucket.Stats().CurrItems; n != 1 {
		t.Fatalf("curr_items %d, want 1", n)
	}

	// A later flush_all replaces a pending one.
	c.do("flush_all 10\r\n", "OK\r\n")
	c.do("flush_all 20 noreply\r\n", "")
	f.clock.Advance(10)
	c.do("get k\r\n", present)
	f.clock.Advance(9)
	c.do("get k\r\n", absent)

	// An immediate one cancels a pending one.
	c.do("set k 0 0 1\r\nv\r\n", "STORED\r\n")
	c.do("flush_all 10\r\n", "OK\r\n")
	c.do("flush_all\r\n", "OK\r\n")
	c.do("set k 0 0 1\r\nv\r\n", "STORED\r\n")
	f.clock.Advance(50)
	c.do("get k\r\n", present)

	// An absolute time works too.
	c.do(fmt.Sprintf("flush_all %d\r\n", f.clock.Now()+30), "OK\r\n")
	f.clock.Advance(28)
	c.do("get k\r\n", present)
	f.clock.Advance(1)
	c.do("get k\r\n", absent)
}

func TestFlushAllDelayedWithoutTraffic(t *testing.T) {
	o := &Options{}
	o.private.flushPoll = 5 * time.Millisecond
	f := newFixture(t, o)
	c := f.dial(t)
	c.do("set k 0 0 1\r\nv\r\n", "STORED\r\n")
	c.do("flush_all 5\r\n", "OK\r\n")
	f.clock.Advance(4)
	// Polls the flush's background timer; only a flush that never
	// happens reaches the deadline, however busy the machine.
	for deadline := time.Now().Add(time.Minute); f.bucket.Stats().CurrItems != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("delayed flush_all did not happen without a command")
		}
	}
}
