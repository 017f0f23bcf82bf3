package memcache

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// "stats reset" zeroes every cumulative counter of "stats", as memcached
// 1.6 does (stats_reset: its global, per-thread and per-item-class
// counters), so "evictions" counts from the reset on; a review found that
// the port reset its own counters but kept the bucket's evictions.
func TestStatsResetZeroesEvictions(t *testing.T) {
	c := quotaServer(t, engine.Memcached, "")
	value := strings.Repeat("v", 400)
	set := func(from, to int) {
		for i := from; i < to; i++ {
			c.do(fmt.Sprintf("set k%d 0 0 %d\r\n%s\r\n", i, len(value), value), "STORED\r\n")
		}
	}
	set(0, 4000) // 1.6 MB of values into a 1 MiB memcached bucket
	if ev := statInt(t, c.stats(), "evictions"); ev == 0 {
		t.Fatalf("evictions 0 after 4000 sets of 400 bytes into 1 MiB")
	}
	c.do("stats reset\r\n", "RESET\r\n")
	st := c.stats()
	if got := st["evictions"]; got != "0" {
		t.Errorf("evictions after stats reset = %s, want 0 (memcached zeroes it)", got)
	}
	itemsAtReset := statInt(t, st, "curr_items")
	set(4000, 8000)
	st = c.stats()
	// Every item stored since the reset is either still there or evicted,
	// and so is every item there at the reset.
	if ev, items := statInt(t, st, "evictions"), statInt(t, st, "curr_items"); ev != 4000+itemsAtReset-items {
		t.Errorf("after stats reset (curr_items %d) and 4000 more sets: evictions %d, curr_items %d; want the evictions since the reset, %d", itemsAtReset, ev, items, 4000+itemsAtReset-items)
	}
}

// The same for "store_no_memory", the stores an ephemeral bucket without
// eviction refused for memory (memcached -M): "stats reset" zeroes it, as
// memcached's does; a review found that it kept its count.
func TestStatsResetZeroesStoreNoMemory(t *testing.T) {
	c := quotaServer(t, engine.Ephemeral, engine.NoEviction)
	value := strings.Repeat("v", 2000)
	refused := 0
	for i := 0; i < 1000 && refused < 3; i++ {
		c.send(fmt.Sprintf("set k%d 0 0 %d\r\n%s\r\n", i, len(value), value))
		switch r := c.line(); r {
		case "STORED\r\n":
		case replyNoMemory + "\r\n":
			refused++
		default:
			t.Fatalf("set k%d: %q", i, r)
		}
	}
	if refused == 0 {
		t.Fatalf("no store refused for memory after 1000 sets of 2000 bytes into 1 MiB")
	}
	if got := statInt(t, c.stats(), "store_no_memory"); got != int64(refused) {
		t.Fatalf("store_no_memory %d, want %d", got, refused)
	}
	c.do("stats reset\r\n", "RESET\r\n")
	if got := c.stats()["store_no_memory"]; got != "0" {
		t.Errorf("store_no_memory after stats reset = %s, want 0 (memcached zeroes it)", got)
	}
	c.do(fmt.Sprintf("set more 0 0 %d\r\n%s\r\n", len(value), value), replyNoMemory+"\r\n")
	if got := c.stats()["store_no_memory"]; got != "1" {
		t.Errorf("store_no_memory after one more refused store = %s, want 1", got)
	}
}
