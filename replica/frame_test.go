package replica

import (
	"bytes"
	"errors"
	"io"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

func TestFrameRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	msgs := []*pb.Message{
		{Type: new(pb.MsgApp), To: new(uint64(2)), From: new(uint64(1)), Term: new(uint64(3)),
			Entries: []*pb.Entry{{Index: new(uint64(7)), Term: new(uint64(3)), Data: []byte("x=1")}}},
		{Type: new(pb.MsgHeartbeat), To: new(uint64(3)), From: new(uint64(1))},
	}
	for i, m := range msgs {
		// The heartbeat goes as a quiesce heartbeat: the mark survives.
		if err := writeFrame(&buf, outMsg{g: GroupID(i + 40), m: m, quiesce: i == 1}); err != nil {
			t.Fatal(err)
		}
	}
	for i, want := range msgs {
		f, err := readFrame(&buf)
		if err != nil || f.g != GroupID(i+40) || !proto.Equal(f.m, want) || f.quiesce != (i == 1) {
			t.Fatalf("frame %d: group %d, %v, quiesce %v, %v; want group %d, %v, quiesce %v", i, f.g, f.m, f.quiesce, err, i+40, want, i == 1)
		}
	}
	// Only a heartbeat may carry the quiesce mark.
	var marked bytes.Buffer
	if err := writeFrame(&marked, outMsg{g: 1, m: msgs[0], quiesce: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := readFrame(&marked); !errors.Is(err, errFrame) {
		t.Fatalf("a marked append: %v, want errFrame", err)
	}
	if _, err := readFrame(&buf); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last frame: %v, want EOF", err)
	}
	// A length claimed but not sent is a short read, not a 256 MB buffer.
	short := []byte{0x0f, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 1, 1, 2, 3}
	if _, err := readFrame(bytes.NewReader(short)); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("a short frame: %v, want ErrUnexpectedEOF", err)
	}
	huge := []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 1}
	if _, err := readFrame(bytes.NewReader(huge)); !errors.Is(err, errFrame) {
		t.Fatalf("a 4 GB frame: %v, want errFrame", err)
	}
}

// FuzzReadFrame: whatever a connection carries, reading frames returns
// messages or an error, never a panic.
func FuzzReadFrame(f *testing.F) {
	var buf bytes.Buffer
	writeFrame(&buf, outMsg{g: 9, m: &pb.Message{Type: new(pb.MsgVote), To: new(uint64(2)), From: new(uint64(1)), Term: new(uint64(5))}})
	f.Add(buf.Bytes())
	f.Add([]byte("GET / HTTP/1.0\r\n\r\n"))
	f.Add([]byte{0, 0, 0, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		for range 1000 {
			if _, err := readFrame(r); err != nil {
				return
			}
		}
	})
}
