package testport

import (
	"fmt"
	"net"
	"testing"
)

// Ports handed out are free to listen on, below the ephemeral range, and
// never overlap one handed out before.
func TestConsecutive(t *testing.T) {
	taken := map[int]bool{}
	var got []int
	for range 20 {
		p := Consecutive(t, 3, taken)
		for _, q := range got {
			if p > q-3 && p < q+3 {
				t.Fatalf("%d overlaps %d", p, q)
			}
		}
		got = append(got, p)
		for off := range 3 {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p+off))
			if err != nil {
				t.Fatal(err)
			}
			l.Close()
		}
		if p < floor || p >= 32768 {
			t.Fatalf("port %d outside [%d, 32768)", p, floor)
		}
	}
}
