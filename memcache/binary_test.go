package memcache

import (
	"encoding/binary"
	"testing"
	"time"
)

// A client speaking memcached's binary protocol (libmemcached's --binary,
// a client configured for it) is refused at once, in its own protocol: one
// response (magic 0x81, the request's opcode and opaque, status 0x83 "not
// supported", the reason as its value), then the connection closes, so the
// client reports the refusal instead of waiting out its own timeout for a
// text-protocol server that waits for a newline the binary request may never
// hold (it waited CommandTimeout, then closed without a word).
func TestBinaryProtocolRefusedAtOnce(t *testing.T) {
	forEachIO(t, func(t *testing.T, io IOModel) {
		// The command timeout is long, so that the old code's silent close
		// at its end cannot pass for the refusal within the client's wait.
		f := newFixture(t, &Options{IO: io, CommandTimeout: 10 * time.Minute})
		c := f.dial(t)
		req := make([]byte, 24, 25)
		req[0] = 0x80                                    // request magic
		req[1] = 0x00                                    // GET
		binary.BigEndian.PutUint16(req[2:], 1)           // key length
		binary.BigEndian.PutUint32(req[8:], 1)           // total body length
		binary.BigEndian.PutUint32(req[12:], 0xdeadbeef) // opaque
		req = append(req, 'a')
		c.send(string(req))
		head := []byte(c.read(24))
		if head[0] != 0x81 || head[1] != 0x00 || binary.BigEndian.Uint16(head[6:]) != binaryNotSupported ||
			binary.BigEndian.Uint32(head[12:]) != 0xdeadbeef || head[4] != 0 || binary.BigEndian.Uint16(head[2:]) != 0 {
			t.Fatalf("response header % x: want magic 81, opcode 00, status 0083, opaque deadbeef, no key or extras", head)
		}
		n := binary.BigEndian.Uint32(head[8:])
		if n == 0 || n > 200 {
			t.Fatalf("body length %d, want the reason", n)
		}
		t.Logf("reason: %s", c.read(int(n)))
		c.expectClosed("")
	})
}
