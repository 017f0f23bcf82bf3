package memcache

import (
	"fmt"
	"testing"
)

// TestForwardedSetCountedOnce: a storage command a node forwards to the
// key's leader counts once in that node's cmd_set, whichever IO model
// serves the connection, as memcached counts each set it is sent. A
// review found the event loop counted it twice (once before handing the
// command to a goroutine that may wait for the leader, and again there).
func TestForwardedSetCountedOnce(t *testing.T) {
	forEachIO(t, func(t *testing.T, io IOModel) {
		f, _ := forwardPair(t, io)
		c := f.dial(t)
		for i := range 3 {
			c.do(fmt.Sprintf("set far%d 0 0 1\r\nx\r\n", i), "STORED\r\n")
		}
		c.do("append far0 0 0 1\r\ny\r\n", "STORED\r\n")
		c.do("set near 0 0 1\r\nx\r\n", "STORED\r\n")
		if got := c.stats()["cmd_set"]; got != "5" {
			t.Fatalf("cmd_set after 5 storage commands (4 forwarded, 1 carried out here): %s, want 5", got)
		}
	})
}
