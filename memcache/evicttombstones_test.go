package memcache

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// pipeline sends the commands in batches and checks that each is answered
// want (one line).
func (c *client) pipeline(cmds []string, want string) {
	c.t.Helper()
	const batch = 500
	for len(cmds) > 0 {
		n := min(batch, len(cmds))
		c.send(strings.Join(cmds[:n], ""))
		for i := range n {
			if got := c.line(); got != want {
				c.t.Fatalf("%q: got %q, want %q", cmds[i], got, want)
			}
		}
		cmds = cmds[n:]
	}
}

// Deleting an item of a memcached bucket frees its memory for new items,
// as memcached frees it: once a full bucket's items are all deleted, new
// items that fit in a fraction of the quota are all kept, and nothing
// live is evicted for them. A review found that the deleted items'
// tombstones stayed in memory ahead of the new items (each delete had
// marked its key recently used), so the bucket evicted about a third of
// 3,000 new 10-byte items (230 KB in a 1 MiB bucket holding no live item)
// and counted them in evictions; flush_all did the same.
func TestMemcachedBucketDeletedItemsLeaveRoomForNewOnes(t *testing.T) {
	c := quotaServer(t, engine.Memcached, "")
	const old, fresh = 20000, 3000
	var sets, deletes []string
	for i := range old {
		sets = append(sets, fmt.Sprintf("set old%d 0 0 10\r\n0123456789\r\n", i))
	}
	c.pipeline(sets, "STORED\r\n")
	st := c.stats()
	if statInt(t, st, "evictions") == 0 {
		t.Fatalf("no eviction after %d sets into a 1 MiB bucket (curr_items %s)", old, st["curr_items"])
	}
	// Delete what is left (the evicted ones are NOT_FOUND).
	for i := range old {
		deletes = append(deletes, fmt.Sprintf("delete old%d\r\n", i))
	}
	c.send(strings.Join(deletes, ""))
	for range old {
		if got := c.line(); got != "DELETED\r\n" && got != "NOT_FOUND\r\n" {
			t.Fatalf("delete: %q", got)
		}
	}
	st = c.stats()
	if items := statInt(t, st, "curr_items"); items != 0 {
		t.Fatalf("curr_items %d after deleting every item", items)
	}
	evictedBefore := statInt(t, st, "evictions")

	sets = sets[:0]
	for i := range fresh {
		sets = append(sets, fmt.Sprintf("set new%d 0 0 10\r\n0123456789\r\n", i))
	}
	c.pipeline(sets, "STORED\r\n")
	missing := 0
	for i := range fresh {
		c.send(fmt.Sprintf("get new%d\r\n", i))
		if l := c.line(); strings.HasPrefix(l, "VALUE ") {
			c.line()
			c.line()
		} else {
			missing++
		}
	}
	st = c.stats()
	if missing > 0 {
		t.Errorf("%d of %d new 10-byte items gone from an emptied 1 MiB memcached bucket (curr_items %s, bytes %s, mem_used %s): memcached keeps them all",
			missing, fresh, st["curr_items"], st["bytes"], st["mem_used"])
	}
	if ev := statInt(t, st, "evictions"); ev != evictedBefore {
		t.Errorf("evictions went from %d to %d while storing %d small items into an emptied bucket: memcached evicts no live item there", evictedBefore, ev, fresh)
	}
}
