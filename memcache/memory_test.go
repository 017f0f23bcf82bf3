package memcache

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// quotaServer serves a new bucket of the given type and evictionPolicy with
// a 1 MiB quota.
func quotaServer(t *testing.T, typ engine.BucketType, policy engine.EvictionPolicy) *client {
	t.Helper()
	eng, err := engine.Open(t.TempDir(), &engine.Options{Clock: engine.NewFakeClock(t0), NumPartitions: 64})
	if err != nil {
		t.Fatal(err)
	}
	b, err := eng.CreateBucket(context.Background(), engine.BucketSettings{Name: "q", Type: typ, RAMQuotaMB: 1, EvictionPolicy: policy})
	if err != nil {
		t.Fatal(err)
	}
	srv, addr, done := serve(t, b, nil)
	t.Cleanup(func() {
		srv.Close()
		<-done
		if err := eng.Check(context.Background()); err != nil {
			t.Errorf("engine.Check: %v", err)
		}
		eng.Close()
	})
	return dialAddr(t, addr)
}

// settingsStats returns the lines of "stats settings" as a map.
func (c *client) settingsStats() map[string]string {
	c.t.Helper()
	c.send("stats settings\r\n")
	m := map[string]string{}
	for l := c.line(); l != "END\r\n"; l = c.line() {
		if f := strings.Fields(l); len(f) == 3 {
			m[f[1]] = f[2]
		}
	}
	return m
}

func statInt(t *testing.T, st map[string]string, name string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(st[name], 10, 64)
	if err != nil {
		t.Fatalf("stat %s = %q", name, st[name])
	}
	return n
}

func TestMemcachedBucketEvictsOnThePort(t *testing.T) {
	c := quotaServer(t, engine.Memcached, "")
	if got := c.settingsStats()["evictions"]; got != "on" {
		t.Errorf("stats settings: evictions %q, want on (a memcached bucket evicts)", got)
	}
	value := strings.Repeat("v", 400)
	const n = 4000
	for i := range n {
		c.do(fmt.Sprintf("set k%d 0 0 %d\r\n%s\r\n", i, len(value), value), "STORED\r\n")
	}
	st := c.stats()
	ev, items := statInt(t, st, "evictions"), statInt(t, st, "curr_items")
	if ev == 0 || ev+items != n {
		t.Errorf("after %d sets of 400 bytes into 1 MiB: evictions %d, curr_items %d", n, ev, items)
	}
	if used, high := statInt(t, st, "mem_used"), statInt(t, st, "ep_mem_high_wat"); used > high || used < statInt(t, st, "bytes") || high != 1<<20*85/100 {
		t.Errorf("mem_used %d, bytes %s, ep_mem_high_wat %d", used, st["bytes"], high)
	}
	if st["ep_mem_low_wat_percent"] != "0.75" || st["ep_num_value_ejects"] != "0" || st["ep_mem_low_wat"] != strconv.Itoa(1<<20*75/100) {
		t.Errorf("ep_num_value_ejects %q, ep_mem_low_wat %q, ep_mem_low_wat_percent %q", st["ep_num_value_ejects"], st["ep_mem_low_wat"], st["ep_mem_low_wat_percent"])
	}
	c.do(fmt.Sprintf("get k%d\r\n", n-1), fmt.Sprintf("VALUE k%d 0 %d\r\n%s\r\nEND\r\n", n-1, len(value), value))
	c.do("get k0\r\n", "END\r\n") // the oldest is gone, as in memcached
}

func TestEphemeralNoEvictionOnThePort(t *testing.T) {
	c := quotaServer(t, engine.Ephemeral, "")
	if got := c.settingsStats()["evictions"]; got != "off" {
		t.Errorf("stats settings: evictions %q, want off (noEviction)", got)
	}
	value := strings.Repeat("v", 400)
	n := 0
	for ; n < 10000; n++ {
		c.send(fmt.Sprintf("set k%d 0 0 %d\r\n%s\r\n", n, len(value), value))
		if l := c.line(); l != "STORED\r\n" {
			if l != "SERVER_ERROR out of memory storing object\r\n" {
				t.Fatalf("set %d past the quota: %q", n, l)
			}
			break
		}
	}
	if n == 10000 {
		t.Fatal("10000 sets of 400 bytes fit a 1 MiB quota")
	}
	st := c.stats()
	if statInt(t, st, "curr_items") != int64(n) || st["store_no_memory"] != "1" || st["evictions"] != "0" {
		t.Errorf("after %d stored and one refused: curr_items %s, store_no_memory %s, evictions %s", n, st["curr_items"], st["store_no_memory"], st["evictions"])
	}
	c.do("get k0\r\n", fmt.Sprintf("VALUE k0 0 %d\r\n%s\r\nEND\r\n", len(value), value))
	c.do("delete k0\r\n", "DELETED\r\n")
	c.do(fmt.Sprintf("set again 0 0 %d\r\n%s\r\n", len(value), value), "STORED\r\n")
}

func TestEphemeralNRUEvictionSaysEvictionsOn(t *testing.T) {
	c := quotaServer(t, engine.Ephemeral, engine.NRUEviction)
	if got := c.settingsStats()["evictions"]; got != "on" {
		t.Errorf("stats settings: evictions %q, want on (nruEviction)", got)
	}
}

// TestCouchbaseValueEvictionOnThePort: a couchbase bucket with a 1 MiB quota
// ejects values (ep_num_value_ejects), and get, append and incr read them
// back from disk intact (ep_bg_fetched).
func TestCouchbaseValueEvictionOnThePort(t *testing.T) {
	c := quotaServer(t, engine.Couchbase, "")
	value := func(i int) string { return fmt.Sprintf("%04d", i) + strings.Repeat("v", 4000) }
	const n = 600
	for i := range n {
		v := value(i)
		c.do(fmt.Sprintf("set k%d 7 0 %d\r\n%s\r\n", i, len(v), v), "STORED\r\n")
	}
	c.do("set counter 0 0 2\r\n41\r\n", "STORED\r\n")
	for i := range n { // push the counter's value out
		v := value(i)
		c.do(fmt.Sprintf("set k%d 7 0 %d\r\n%s\r\n", i, len(v), v), "STORED\r\n")
	}
	st := c.stats()
	if statInt(t, st, "ep_num_value_ejects") == 0 || statInt(t, st, "vb_active_perc_mem_resident") >= 100 ||
		statInt(t, st, "ep_num_non_resident") == 0 || statInt(t, st, "mem_used") > 1<<20 {
		t.Fatalf("after %d sets of 4 KB into 1 MiB: ep_num_value_ejects %s, vb_active_perc_mem_resident %s, ep_num_non_resident %s, mem_used %s",
			2*n, st["ep_num_value_ejects"], st["vb_active_perc_mem_resident"], st["ep_num_non_resident"], st["mem_used"])
	}
	for i := range n {
		v := value(i)
		c.do(fmt.Sprintf("get k%d\r\n", i), fmt.Sprintf("VALUE k%d 7 %d\r\n%s\r\nEND\r\n", i, len(v), v))
	}
	c.do("incr counter 1\r\n", "42\r\n")
	c.do("append k0 0 0 3\r\nend\r\n", "STORED\r\n")
	v := value(0) + "end"
	c.do("get k0\r\n", fmt.Sprintf("VALUE k0 7 %d\r\n%s\r\nEND\r\n", len(v), v))
	if st := c.stats(); statInt(t, st, "ep_bg_fetched") == 0 {
		t.Errorf("ep_bg_fetched %s after reading ejected values", st["ep_bg_fetched"])
	}
}
