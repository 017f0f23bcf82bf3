package memcache

import (
	"strconv"
	"strings"
	"testing"
)

// An "ms" (memcached 1.6's meta set) line is followed by a data block, as a
// "set" line is: "ms <key> <datalen> [flags]\r\n<data>\r\n". Whatever Mayfly
// answers the line with, the data block is the value's bytes, never a
// command of its own; a review found that the port answered the line ERROR
// and then ran the block as the next command, so a meta client storing the
// value "delete other" deleted the item "other".
func TestMetaSetDataBlockIsNotRunAsCommand(t *testing.T) {
	f := newFixture(t, nil)
	c := f.dial(t)
	c.do("set other 0 0 1\r\nx\r\n", "STORED\r\n")
	const block = "delete other"
	c.send("ms k " + strconv.Itoa(len(block)) + "\r\n" + block + "\r\nget other\r\n")
	answer := c.line() // one line for the ms line, whatever it says
	if strings.HasPrefix(answer, "VALUE") || answer == "DELETED\r\n" {
		t.Fatalf("ms answered %q: want one reply line for the ms command", answer)
	}
	for _, want := range []string{"VALUE other 0 1\r\n", "x\r\n", "END\r\n"} {
		if got := c.line(); got != want {
			t.Fatalf("after \"ms k %d\" with the block %q, get other: got %q, want %q (the block was run as a command)", len(block), block, got, want)
		}
	}
}
