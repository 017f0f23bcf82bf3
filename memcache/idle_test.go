package memcache

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestIdleAndHalfCommandsAreKicked: connections that hold every slot, idle
// or with half a command (a line, or a data block) sent, are closed after
// IdleTimeout or CommandTimeout, so a new client gets in; each close counts
// in idle_kicks.
func TestIdleAndHalfCommandsAreKicked(t *testing.T) {
	f := newFixture(t, &Options{MaxConns: 4, IdleTimeout: 200 * time.Millisecond, CommandTimeout: 200 * time.Millisecond})
	var held []*client
	for _, half := range []string{"", "", "set k 0 0 100\r\nabc", "get ke"} {
		c := f.dial(t)
		c.send(half)
		held = append(held, c)
	}
	deadline := time.Now().Add(30 * time.Second)
	var in *client
	for in == nil {
		if time.Now().After(deadline) {
			t.Fatal("no new client admitted while idle and half-sent connections held every slot")
		}
		c := f.dial(t)
		c.send("version\r\n")
		if l, err := c.r.ReadString('\n'); err == nil && l == "VERSION "+DefaultVersion+"\r\n" {
			in = c
		} else {
			c.nc.Close()
		}
	}
	in.nc.Close()
	for _, c := range held {
		c.expectClosed("") // no answer to half a command
	}
	if f.srv.Stats().IdleKicks < 4 {
		t.Fatalf("Stats().IdleKicks = %d", f.srv.Stats().IdleKicks)
	}
	// The stats asked on a new connection, both commands in its first
	// write: a client idle for the timeout between two commands (a
	// busy machine's pause) would be kicked too.
	q := f.dial(t)
	q.send("stats\r\nstats settings\r\n")
	kicks := ""
	for l := q.line(); l != "END\r\n"; l = q.line() {
		if v, ok := strings.CutPrefix(l, "STAT idle_kicks "); ok {
			kicks = strings.TrimSpace(v)
		}
	}
	if n, err := strconv.Atoi(kicks); err != nil || n < 4 {
		t.Fatalf("idle_kicks %q, want at least 4", kicks)
	}
	found := false
	for l := q.line(); l != "END\r\n"; l = q.line() {
		if strings.HasPrefix(l, "STAT idle_timeout ") {
			found = l == "STAT idle_timeout 0\r\n" // 200ms shows as 0 whole seconds
		}
	}
	if !found {
		t.Fatal("stats settings: no idle_timeout")
	}
}

// TestTimeoutsOff: negative timeouts keep connections, and there is no
// idle_kicks stat, as memcached without idle_timeout.
func TestTimeoutsOff(t *testing.T) {
	f := newFixture(t, &Options{IdleTimeout: -1, CommandTimeout: -1})
	c := f.dial(t)
	if _, ok := c.stats()["idle_kicks"]; ok {
		t.Fatal("idle_kicks shown with no timeout")
	}
}
