package memcache

import "testing"

// "cache_memlimit N" cannot change the memory a bucket takes: that is its
// RAM quota, set over REST. The port answers a limit memcached would take
// with a CLIENT_ERROR that says so, and, as memcached does for every
// answer to cache_memlimit, says nothing with noreply, so a pipeline stays
// in step; the lines memcached answers ERROR (no limit, a bad number, too
// many tokens) get ERROR. A review found it answered every line ERROR and
// ignored noreply.
func TestCacheMemlimitPointsToRAMQuota(t *testing.T) {
	forEachIO(t, func(t *testing.T, io IOModel) {
		f := newFixture(t, &Options{IO: io})
		c := f.dial(t)
		for _, req := range []string{"cache_memlimit 64\r\n", "cache_memlimit 64 x\r\n"} {
			c.send(req)
			if got := c.line(); got != replyMemlimit+"\r\n" {
				t.Fatalf("%q: got %q, want %q", req, got, replyMemlimit+"\r\n")
			}
		}
		c.do("cache_memlimit 64 noreply\r\n", "")
		c.do("cache_memlimit abc noreply\r\n", "")
		c.do("cache_memlimit abc\r\n", "ERROR\r\n")
		c.do("cache_memlimit -5\r\n", "ERROR\r\n")
		c.do("cache_memlimit\r\n", "ERROR\r\n")
		c.do("cache_memlimit 1 2 3\r\n", "ERROR\r\n")
	})
}
