package memcache

import (
	"fmt"
	"slices"
	"strings"
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

// TestForwardedCommandsCountedAsLocalOnes: the node a client asked counts
// every command it forwarded in its stats as it counts one it carries out
// itself (cmd_get, get_hits, touch_misses, delete_hits, incr_hits,
// cas_badval, total_items, ...), from the leader's answer: the same
// commands give the same counts whichever node leads their keys; the
// leader does not count them again. A review found forwarded gets,
// touches, deletes, incrs and decrs were not counted there at all (and
// the leader counted every forwarded command).
func TestForwardedCommandsCountedAsLocalOnes(t *testing.T) {
	forEachIO(t, func(t *testing.T, io IOModel) {
		f, l := forwardPair(t, io)
		c := f.dial(t)
		run := func(p string) (replies []string, counts map[string]string) {
			script := []string{
				"set %s1 0 0 1\r\nx\r\n", "add %s1 0 0 1\r\nx\r\n", "get %[1]s1 %[1]s2\r\n", "get %s1\r\n",
				"cas %s1 0 0 1 999999\r\nz\r\n", "cas %s9 0 0 1 1\r\nz\r\n", "touch %s1 0\r\n", "touch %s9 0\r\n",
				"gat 0 %[1]s1 %[1]s9\r\n", "delete %s9\r\n", "set %s3 0 0 1\r\n5\r\n", "incr %s3 2\r\n",
				"decr %s3 1\r\n", "incr %s9 1\r\n", "decr %s9 1\r\n", "append %s1 0 0 1\r\ny\r\n", "delete %s1\r\n",
			}
			for _, cmd := range script {
				c.send(fmt.Sprintf(cmd, p))
				var r string
				for {
					l := c.line()
					r += l
					if !strings.HasPrefix(l, "VALUE ") {
						break
					}
					r += c.line() // its data
				}
				replies = append(replies, strings.ReplaceAll(r, p, "P"))
			}
			counts = c.stats()
			c.do("stats reset\r\n", "RESET\r\n")
			return replies, counts
		}
		c.do("stats reset\r\n", "RESET\r\n")
		localReplies, local := run("near")
		farReplies, far := run("far")
		if !slices.Equal(localReplies, farReplies) {
			t.Fatalf("answers carried out here %q, forwarded %q", localReplies, farReplies)
		}
		for _, k := range []string{"cmd_get", "get_hits", "get_misses", "cmd_set", "cmd_touch", "touch_hits", "touch_misses",
			"delete_hits", "delete_misses", "incr_hits", "incr_misses", "decr_hits", "decr_misses",
			"cas_hits", "cas_misses", "cas_badval", "total_items"} {
			if local[k] != far[k] {
				t.Errorf("%s: %s for commands carried out here, %s for the same commands forwarded", k, local[k], far[k])
			}
		}
		if st := l.srv.Stats(); st.CmdGet != 0 || st.CmdSet != 0 || st.CmdTouch != 0 || st.GetHits != 0 || st.GetMisses != 0 ||
			st.DeleteHits != 0 || st.IncrHits != 0 || st.DecrMisses != 0 || st.CasBadval != 0 || st.TotalItems != 0 {
			t.Errorf("the leader counted the forwarded commands again: %+v", st)
		}
	})
}
