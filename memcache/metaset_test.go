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

// An "ms" line memcached 1.6.18 refuses before reading its block (a key
// over 250 bytes, no datalen, a bad datalen, more than 20 tokens) gets
// memcached's reply and the next line is a command, as there; one it reads
// the block of gets memcached's answer to a block it cannot take (over the
// item size limit: swallowed; not ending in "\r\n"), or ERROR. Each IO
// model does the same.
func TestMetaSetLinesAnsweredAsMemcached(t *testing.T) {
	forEachIO(t, func(t *testing.T, io IOModel) {
		f := newFixture(t, &Options{IO: io})
		c := f.dial(t)
		big := 1<<20 - itemHeaderLen - 1 - 1 - 2 + 1 // key "b": one byte over memcached's -I 1m
		for _, tc := range []struct{ req, want string }{
			{"ms k 2\r\nab\r\n", "ERROR\r\n"},
			{"ms k 0\r\n\r\n", "ERROR\r\n"},
			{"ms k 2 T0 F5 q\r\nab\r\n", "ERROR\r\n"},
			{"ms k 3\r\nabcde\r\n", "CLIENT_ERROR bad data chunk\r\nERROR\r\n"},
			{"ms k\r\n", "CLIENT_ERROR bad command line format\r\n"},
			{"ms k abc\r\n", "CLIENT_ERROR bad command line format\r\n"},
			{"ms k -1\r\n", "CLIENT_ERROR bad command line format\r\n"},
			{"ms k 2147483647\r\n", "CLIENT_ERROR bad command line format\r\n"},
			{"ms " + strings.Repeat("k", 251) + " 2\r\nab\r\n", "CLIENT_ERROR bad command line format\r\nERROR\r\n"},
			{"ms k 2" + strings.Repeat(" T1", 17) + "\r\nab\r\n", "CLIENT_ERROR options flags too long\r\nERROR\r\n"},
			{"ms b " + strconv.Itoa(big) + "\r\n" + strings.Repeat("v", big) + "\r\n", "SERVER_ERROR object too large for cache\r\n"},
			{"ms b " + strconv.Itoa(3<<20) + "\r\n" + strings.Repeat("v", 3<<20) + "\r\n", "SERVER_ERROR object too large for cache\r\n"},
			{"ms\r\n", "ERROR\r\n"},
		} {
			c.do(tc.req, tc.want)
		}
	})
}
