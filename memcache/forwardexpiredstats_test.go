package memcache

import "testing"

// TestForwardedGetOfExpiredItemCountedInGetExpired: a get this node
// forwarded that found its item expired on the leader counts in
// get_expired here, as one carried out here does: the node a client asked
// counts its commands, and the leader does not count forwarded ones. A
// review found such a get counted in get_expired on neither node (the
// leader no longer counts forwarded commands, and the forwarding node
// counts only get_hits and get_misses from the answer).
func TestForwardedGetOfExpiredItemCountedInGetExpired(t *testing.T) {
	forEachIO(t, func(t *testing.T, io IOModel) {
		f, l := forwardPair(t, io)
		c := f.dial(t)
		c.do("set near1 0 10 1\r\nx\r\n", "STORED\r\n")
		c.do("set far1 0 10 1\r\nx\r\n", "STORED\r\n")
		f.clock.Advance(60)
		l.clock.Advance(60)
		c.do("stats reset\r\n", "RESET\r\n")
		c.do("get near1\r\n", "END\r\n")
		local := c.stats()["get_expired"]
		c.do("stats reset\r\n", "RESET\r\n")
		c.do("get far1\r\n", "END\r\n")
		far := c.stats()["get_expired"]
		if local != "1" || far != local {
			t.Fatalf("get_expired: %s for an expired item read here, %s for one read from the leader (the leader counted %d); want 1 for both",
				local, far, l.srv.Stats().GetExpired)
		}
	})
}
