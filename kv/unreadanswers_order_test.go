package kv_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/couchbase/gocbcore/v10/memd"
)

// TestAnswersHeldBackComeInOrder checks that a connection that stopped
// running requests because its client left large answers unread (the
// bound on unsent answer bytes) goes on once the client reads, and that
// every answer then arrives, whole and in request order: large GETs,
// small ones on other documents, misses and NOOPs mixed.
func TestAnswersHeldBackComeInOrder(t *testing.T) {
	f := newFixture(t)
	c := f.dial(t)
	c.hello()
	c.login(adminUser, adminPass)
	big := strings.Repeat("b", 3<<20/2) // larger than the bound on its own
	c.set(memd.CmdSet, "big", big, 0, 0, 0, memd.StatusSuccess)
	c.set(memd.CmdSet, "small", "s", 0, 0, 0, memd.StatusSuccess)

	type want struct {
		cmd    memd.CmdCode
		status memd.StatusCode
		value  string
	}
	var wants []want
	var reqs []*memd.Packet
	for i := range 120 {
		switch i % 4 {
		case 0:
			reqs = append(reqs, &memd.Packet{Command: memd.CmdGet, Key: []byte("big")})
			wants = append(wants, want{memd.CmdGet, memd.StatusSuccess, big})
		case 1:
			reqs = append(reqs, &memd.Packet{Command: memd.CmdGet, Key: []byte("small")})
			wants = append(wants, want{memd.CmdGet, memd.StatusSuccess, "s"})
		case 2:
			reqs = append(reqs, &memd.Packet{Command: memd.CmdNoop})
			wants = append(wants, want{memd.CmdNoop, memd.StatusSuccess, ""})
		case 3:
			reqs = append(reqs, &memd.Packet{Command: memd.CmdGet, Key: []byte("missing")})
			wants = append(wants, want{memd.CmdGet, memd.StatusKeyNotFound, ""})
		}
	}
	first := c.opaque + 1
	sent := make(chan error, 1)
	go func() {
		var err error
		for i, p := range reqs {
			p.Magic, p.Opaque = memd.CmdMagicReq, first+uint32(i)
			if err = c.mc.WritePacket(p); err != nil {
				break
			}
		}
		sent <- err
	}()
	// Let the server reach its bound before the client reads anything.
	time.Sleep(500 * time.Millisecond)
	for i, w := range wants {
		r := c.read()
		if r.Opaque != first+uint32(i) || r.Command != w.cmd {
			t.Fatalf("answer %d: got %v opaque %d, want %v opaque %d", i, r.Command, r.Opaque, w.cmd, first+uint32(i))
		}
		if r.Status != w.status {
			t.Fatalf("answer %d (%v): status %v, want %v", i, w.cmd, r.Status, w.status)
		}
		if w.status == memd.StatusSuccess && !bytes.Equal(r.Value, []byte(w.value)) {
			t.Fatalf("answer %d (%v): a value of %d bytes, want %d", i, w.cmd, len(r.Value), len(w.value))
		}
	}
	if err := <-sent; err != nil {
		t.Fatalf("sending the requests: %v", err)
	}
	// The connection still works.
	c.expect(&memd.Packet{Command: memd.CmdNoop}, memd.StatusSuccess)
}
