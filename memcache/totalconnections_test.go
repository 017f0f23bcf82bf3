package memcache

import "testing"

// total_connections counts the listening socket too, as memcached counts
// its listeners (memcached 1.6 with one listener answers 2 to its first
// client's stats, 3 to the next), and stats reset zeroes it; a review
// found the port counted its clients only, one less than memcached.
func TestTotalConnectionsCountsListener(t *testing.T) {
	f := newFixture(t, nil)
	c := f.dial(t)
	if got := c.stats()["total_connections"]; got != "2" {
		t.Fatalf("total_connections on the first client: %q, want 2 (the listener and the client)", got)
	}
	c2 := f.dial(t)
	if got := c2.stats()["total_connections"]; got != "3" {
		t.Fatalf("total_connections on the second client: %q, want 3", got)
	}
	c2.do("stats reset\r\n", "RESET\r\n")
	if got := c2.stats()["total_connections"]; got != "0" {
		t.Fatalf("total_connections after stats reset: %q, want 0", got)
	}
}
