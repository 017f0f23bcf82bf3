package testport

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
)

// Ports handed out are free to listen on, below the ephemeral range, and
// never overlap one handed out before while its test runs.
func TestConsecutive(t *testing.T) {
	var got []int
	for range 20 {
		p := Consecutive(t, 3)
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

// A port handed out is reserved against any other reservation (another
// test's, another process's: the lock is the same) until its test ends,
// and then let go.
func TestReservedUntilTheTestEnds(t *testing.T) {
	dir := filepath.Join(os.TempDir(), "mayfly-testport")
	var p int
	t.Run("holder", func(t *testing.T) {
		p = Consecutive(t, 2)
		for off := range 2 {
			held, err := reserve(dir, p+off, 1)
			if err != nil {
				t.Fatal(err)
			}
			if held != nil {
				t.Fatalf("port %d reserved twice while its test runs", p+off)
			}
		}
	})
	held, err := reserve(dir, p, 2)
	if err != nil {
		t.Fatal(err)
	}
	if held == nil {
		t.Fatalf("ports %d-%d still reserved after their test ended", p, p+1)
	}
	for _, f := range held {
		f.Close()
	}
}
