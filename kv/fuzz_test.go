package kv

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/couchbase/gocbcore/v10/memd"
)

// FuzzReadRequest feeds arbitrary bytes to the packet reader: it must
// return a packet or an error, never panic, and never read a body over the
// limit.
func FuzzReadRequest(f *testing.F) {
	var buf bytes.Buffer
	mc := memd.NewConn(&buf)
	mc.EnableFeature(memd.FeatureCollections)
	mc.EnableFeature(memd.FeatureAltRequests)
	mc.EnableFeature(memd.FeatureSyncReplication)
	mc.EnableFeature(memd.FeaturePreserveExpiry)
	for _, p := range []*memd.Packet{
		{Magic: memd.CmdMagicReq, Command: memd.CmdGet, Key: []byte("k"), CollectionID: 9},
		{Magic: memd.CmdMagicReq, Command: memd.CmdSet, Key: []byte("k"), Value: []byte(`{"a":1}`), Extras: make([]byte, 8),
			PreserveExpiryFrame: &memd.PreserveExpiryFrame{}, DurabilityLevelFrame: &memd.DurabilityLevelFrame{DurabilityLevel: 1}},
		{Magic: memd.CmdMagicReq, Command: memd.CmdHello, Key: []byte("agent"), Value: []byte{0, 7, 0, 0x12}},
	} {
		buf.Reset()
		if err := mc.WritePacket(p); err != nil {
			f.Fatal(err)
		}
		f.Add(append([]byte(nil), buf.Bytes()...), true)
	}
	f.Add([]byte{0x08, 0, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0}, false)
	const maxBody = 1 << 12
	f.Fuzz(func(t *testing.T, data []byte, collections bool) {
		r := bufio.NewReaderSize(bytes.NewReader(data), 1<<10)
		for {
			pkt, h, err := readRequest(r, collections, maxBody)
			if err != nil {
				if !errors.Is(err, ErrBadPacket) && !errors.Is(err, ErrPacketTooLarge) && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if h.bodyLen > maxBody || len(pkt.Key)+len(pkt.Extras)+len(pkt.Value) > maxBody {
				t.Fatalf("a body of %d bytes passed a limit of %d", h.bodyLen, maxBody)
			}
			if binary.BigEndian.Uint32(h.raw[12:]) != pkt.Opaque {
				t.Fatal("opaque lost")
			}
		}
	})
}
