package kv_test

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/couchbase/gocbcore/v10/memd"

	"github.com/mayflydb/mayfly/kv"
)

// rawHeader builds a request header by hand.
func rawHeader(magic byte, cmd memd.CmdCode, keyLen uint16, extLen byte, bodyLen uint32, opaque uint32) []byte {
	h := make([]byte, 24)
	h[0], h[1] = magic, byte(cmd)
	binary.BigEndian.PutUint16(h[2:], keyLen)
	h[4] = extLen
	binary.BigEndian.PutUint32(h[8:], bodyLen)
	binary.BigEndian.PutUint32(h[12:], opaque)
	return h
}

// A malformed or oversized packet gets an error answer and a closed
// connection; the server goes on serving others.
func TestBadPackets(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		name string
		pkt  []byte
		want memd.StatusCode
	}{
		{"wrong magic", rawHeader(0x81, memd.CmdGet, 0, 0, 0, 7), memd.StatusInvalidArgs},
		// 4 GiB announced, nothing sent: refused before any allocation.
		{"oversized", rawHeader(0x80, memd.CmdSet, 1, 8, 0xffffffff, 7), memd.StatusTooBig},
		{"key beyond the body", append(rawHeader(0x80, memd.CmdGet, 10, 0, 3, 7), "abc"...), memd.StatusInvalidArgs},
		{"frame overruns", append(func() []byte {
			h := rawHeader(0x08, memd.CmdGet, 0, 0, 2, 7)
			h[2], h[3] = 2, 0 // 2 bytes of framing extras, no key
			return h
		}(), 0x05, 0x00), memd.StatusInvalidArgs}, // a frame of 5 bytes in 2
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := f.dial(t)
			if _, err := c.nc.Write(tc.pkt); err != nil {
				t.Fatal(err)
			}
			r := c.read()
			if r.Status != tc.want || r.Opaque != 7 {
				t.Fatalf("status %v opaque %d, want %v 7", r.Status, r.Opaque, tc.want)
			}
			c.expectClosed()
		})
	}
	c := f.dial(t)
	c.expect(&memd.Packet{Command: memd.CmdNoop}, memd.StatusSuccess)
}

// An idle connection, and one whose packet stops half-way, are closed.
func TestTimeouts(t *testing.T) {
	f := newFixture(t, func(o *kv.Options) {
		o.IdleTimeout = 100 * time.Millisecond
		o.PacketTimeout = 100 * time.Millisecond
	})
	// A connection the test could not write to within the idle timeout of
	// its accept (a pause on a busy machine) is closed before its NOOP:
	// a new one is dialled, a few times at most.
	for try := 1; ; try++ {
		idle := f.dial(t)
		idle.send(&memd.Packet{Command: memd.CmdNoop})
		r, _, err := idle.mc.ReadPacket()
		if err != nil {
			if try == 5 {
				t.Fatalf("5 connections closed before the answer to their NOOP: %v", err)
			}
			continue
		}
		if r.Status != memd.StatusSuccess {
			t.Fatalf("NOOP: status %v, want success", r.Status)
		}
		idle.expectClosed()
		break
	}

	half := f.dial(t)
	if _, err := half.nc.Write(rawHeader(0x80, memd.CmdGet, 1, 0, 1, 7)[:10]); err != nil {
		t.Fatal(err)
	}
	half.expectClosed()
}
