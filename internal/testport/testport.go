// Package testport finds free loopback ports for tests that start servers
// on fixed ports (a cluster node's cluster port P and its etcd ports P+1
// and P+2), below the kernel's ephemeral range: a node restarted in a test
// binds its ports again seconds after it let them go, and a port in that
// range could meanwhile be the local port of any outgoing connection on
// the machine ("address already in use").
//
// A port handed out stays reserved until the test ends, across parallel
// tests and across test processes (go test runs packages side by side):
// each port's reservation is an flock(2) on a file named for it in the
// temporary directory, which the kernel lets go when the test's cleanup
// closes it or its process dies. A free port is not enough: between the
// pick and the node's start another test's pick could take it.
package testport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// floor is the lowest port handed out.
const floor = 10000

// Consecutive returns a port P such that P … P+n-1 are free on loopback
// now, below the ephemeral range, and reserved for t until it ends: no
// other call, in this process or another, hands out any of them
// meanwhile. It skips the test when the ephemeral range leaves no room
// below it.
func Consecutive(t testing.TB, n int) int {
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
	dir := filepath.Join(os.TempDir(), "mayfly-testport")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		t.Fatalf("testport: %v", err)
	}
	for range 1000 {
		p := floor + rand.IntN(low-floor-n)
		held, err := reserve(dir, p, n)
		if err != nil {
			t.Fatalf("testport: %v", err)
		}
		if held == nil {
			continue
		}
		if free(p, n) {
			t.Cleanup(func() {
				for _, f := range held {
					f.Close()
				}
			})
			return p
		}
		for _, f := range held {
			f.Close()
		}
	}
	t.Fatalf("no %d free consecutive ports below %d", n, low)
	return 0
}

// reserve takes the lock of each port p … p+n-1, or none: it returns nil
// when another holds any of them.
func reserve(dir string, p, n int) ([]*os.File, error) {
	var held []*os.File
	release := func() {
		for _, f := range held {
			f.Close()
		}
	}
	for off := range n {
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(p+off)), os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			release()
			return nil, err
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			release()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, nil
			}
			return nil, fmt.Errorf("locking port %d's reservation: %w", p+off, err)
		}
		held = append(held, f)
	}
	return held, nil
}

// free reports whether ports p … p+n-1 can be listened on now.
func free(p, n int) bool {
	for off := range n {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p+off))
		if err != nil {
			return false
		}
		l.Close()
	}
	return true
}
