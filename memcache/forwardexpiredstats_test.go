package memcache

import "testing"

// TestForwardedGetOfExpiredItemCountedInGetExpired: a get that finds its
// item expired counts in get_expired once in the cluster: on the node asked
// when it holds the item, on the leader when the get was forwarded (the
// forwarded answer, END, cannot tell an expired item from a missing one). A
// review found such a forwarded get counted in get_expired on neither node.
func TestForwardedGetOfExpiredItemCountedInGetExpired(t *testing.T) {
	forEachIO(t, func(t *testing.T, io IOModel) {
		f, l := forwardPair(t, io)
		c := f.dial(t)
		c.do("set near1 0 10 1\r\nx\r\n", "STORED\r\n")
		c.do("set far1 0 10 1\r\nx\r\n", "STORED\r\n")
		f.clock.Advance(60)
		l.clock.Advance(60)
		c.do("get near1\r\n", "END\r\n")
		if got := f.srv.Stats().GetExpired; got != 1 {
			t.Fatalf("get_expired %d on the node holding the expired item, want 1", got)
		}
		leaderBefore := l.srv.Stats().GetExpired
		c.do("get far1\r\n", "END\r\n")
		asked, leader := f.srv.Stats().GetExpired, l.srv.Stats().GetExpired-leaderBefore
		if asked+leader-1 != 1 || leader != 1 {
			t.Fatalf("a forwarded get of an expired item: get_expired +%d on the node asked, +%d on the leader; want it once, on the leader", asked-1, leader)
		}
	})
}
