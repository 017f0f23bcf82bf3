package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/engine"
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
		ctx, cancel := context.WithCancel(context.Background())
		cfg, err := parseServeFlags(tc.args, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		eng, err := engine.Open(t.TempDir(), &engine.Options{Clock: engine.NewFakeClock(1_700_000_000), NumPartitions: 8, NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := eng.CreateBucket(ctx, engine.DefaultBucketSettings(cfg.mcBucket)); err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		mc, err := startMemcached(ctx, eng, cfg, slog.New(slog.DiscardHandler), nil, ln, nil)
		if err != nil {
			t.Fatal(err)
		}
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
		mc.Close()
		cancel()
		eng.Close()
	}
}
