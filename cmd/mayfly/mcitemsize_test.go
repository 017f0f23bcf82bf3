package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
)

// TestMemcachedItemSizeMaxFlag: --memcached-item-size-max is the largest
// item the memcached port stores (memcached's -I): at the default 1 MiB a
// 2 MiB value is refused as memcached refuses it; at 3 MiB it is stored
// and read back whole, and `stats settings` shows the limit.
func TestMemcachedItemSizeMaxFlag(t *testing.T) {
	value := strings.Repeat("x", 2<<20)
	for _, tc := range []struct {
		args   []string
		stored bool
		max    int
	}{{nil, false, 1 << 20}, {[]string{"--memcached-item-size-max", "3145728"}, true, 3 << 20}} {
		_, _, ln := memcachedAsServed(t, tc.args)
		nc, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(nc)
		fmt.Fprintf(nc, "set big 0 0 %d\r\n%s\r\n", len(value), value)
		line, _ := r.ReadString('\n')
		want := "SERVER_ERROR object too large for cache\r\n"
		if tc.stored {
			want = "STORED\r\n"
		}
		if line != want {
			t.Errorf("%v: a 2 MiB set answered %q, want %q", tc.args, line, want)
		}
		fmt.Fprint(nc, "stats settings\r\n")
		found := false
		for {
			line, err := r.ReadString('\n')
			if err != nil || line == "END\r\n" {
				break
			}
			found = found || line == fmt.Sprintf("STAT item_size_max %d\r\n", tc.max)
		}
		if !found {
			t.Errorf("%v: stats settings has no item_size_max %d", tc.args, tc.max)
		}
		if tc.stored {
			fmt.Fprint(nc, "get big\r\n")
			hdr, _ := r.ReadString('\n')
			got := make([]byte, len(value)+2)
			if _, err := io.ReadFull(r, got); err != nil || hdr != fmt.Sprintf("VALUE big 0 %d\r\n", len(value)) || string(got[:len(value)]) != value {
				t.Errorf("reading the 2 MiB value back: %q %v", hdr, err)
			}
		}
		nc.Close()
	}
}
