package memcache

import (
	"fmt"
	"strings"
	"testing"
)

// TestValueSizesOneConnection stores values that grow and shrink on one
// connection, one at a time and pipelined in one send: the connection's data
// buffer grows with the values (past its kept limit too) and each value is
// stored whole, none mixed with the bytes of an earlier, longer one.
func TestValueSizesOneConnection(t *testing.T) {
	f := newFixture(t, nil)
	c := f.dial(t)
	sizes := []int{0, 1, 255, 256, 257, 3, 1000, 5000, 100, maxKeptData - 2, maxKeptData, 70000, 7, 300}
	val := func(i, n int) string { return strings.Repeat(string(rune('a'+i%26)), n) }
	for i, n := range sizes {
		c.do(fmt.Sprintf("set k%d 0 0 %d\r\n%s\r\n", i, n, val(i, n)), "STORED\r\n")
	}
	var batch, want strings.Builder
	for i, n := range sizes {
		fmt.Fprintf(&batch, "set p%d 0 0 %d\r\n%s\r\n", i, n, val(i+1, n))
		want.WriteString("STORED\r\n")
	}
	c.do(batch.String(), want.String())
	for i, n := range sizes {
		c.do(fmt.Sprintf("get k%d p%d\r\n", i, i), fmt.Sprintf("VALUE k%d 0 %d\r\n%s\r\nVALUE p%d 0 %d\r\n%s\r\nEND\r\n", i, n, val(i, n), i, n, val(i+1, n)))
	}
}
