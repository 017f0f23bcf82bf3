package memcache

import (
	"strings"
	"testing"
)

// "stats cachedump <class> <limit>" is how memcdump (libmemcached-tools)
// lists keys: it asks it of every slab class and stops at the first answer
// that is neither a listing nor a CLIENT_ERROR. While "stats settings" says
// dump_enabled no, the port answers it as memcached -X (dumps disabled)
// does, "CLIENT_ERROR stats cachedump not allowed", so memcdump says why it
// cannot list; with dumps enabled, a listing ending in END. A review found
// it answered ERROR (an unknown command), and memcdump printed "Failed to
// dump keys:SUCCESS".
func TestStatsCachedumpAnsweredAsMemcached(t *testing.T) {
	f := newFixture(t, nil)
	c := f.dial(t)
	c.do("set a 0 0 1\r\nx\r\n", "STORED\r\n")
	dump := c.settingsStats()["dump_enabled"]
	c.send("stats cachedump 1 0\r\n")
	got := c.line()
	switch dump {
	case "no":
		if want := "CLIENT_ERROR stats cachedump not allowed\r\n"; got != want {
			t.Fatalf("stats cachedump with dump_enabled no: got %q, want %q", got, want)
		}
	default:
		for got != "END\r\n" {
			if !strings.HasPrefix(got, "ITEM ") {
				t.Fatalf("stats cachedump with dump_enabled %q: got %q, want ITEM lines and END", dump, got)
			}
			got = c.line()
		}
	}
	c.do("version\r\n", "VERSION "+DefaultVersion+"\r\n")
}
