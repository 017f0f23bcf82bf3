// Package testport finds free loopback ports for tests that start servers
// on fixed ports (a cluster node's cluster port P and its etcd ports P+1
// and P+2), below the kernel's ephemeral range: a node restarted in a test
// binds its ports again seconds after it let them go, and a port in that
// range could meanwhile be the local port of any outgoing connection on
// the machine ("address already in use").
package testport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// floor is the lowest port handed out.
const floor = 10000

// Consecutive returns a port P such that P … P+n-1 are free on loopback
// now, below the ephemeral range, and none of P-n+1 … P+n-1 is in taken
// (ports handed out before in the same test, which it adds P to). It skips
// the test when the ephemeral range leaves no room below it.
func Consecutive(t testing.TB, n int, taken map[int]bool) int {
	t.Helper()
	low := 32768 // Linux's default
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil {
				low = v
			}
		}
	}
	if low < floor+100 {
		t.Skipf("the ephemeral port range starts at %d: no room below it", low)
	}
	for range 1000 {
		p := floor + rand.IntN(low-floor-n)
		ok := true
		for off := -(n - 1); ok && off < n; off++ {
			if taken[p+off] {
				ok = false
			}
		}
		for off := 0; ok && off < n; off++ {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p+off))
			if err != nil {
				ok = false
				break
			}
			l.Close()
		}
		if ok {
			if taken != nil {
				taken[p] = true
			}
			return p
		}
	}
	t.Fatalf("no %d free consecutive ports below %d", n, low)
	return 0
}
