package memcache

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
)

// TestFlushAllAudited: each flush_all is told to Options.Audit before it
// takes effect, and refused, flushing nothing, when Audit fails.
func TestFlushAllAudited(t *testing.T) {
	var mu sync.Mutex
	var got []AuditEvent
	var fail error
	f := newFixture(t, &Options{Audit: func(ctx context.Context, e AuditEvent) error {
		mu.Lock()
		defer mu.Unlock()
		if fail != nil {
			return fail
		}
		got = append(got, e)
		return nil
	}})
	c := f.dial(t)
	c.do("set k 0 0 1\r\nv\r\n", "STORED\r\n")
	c.do("flush_all\r\n", "OK\r\n")
	c.do("get k\r\n", "END\r\n")
	c.do("flush_all 100 noreply\r\n", "")
	c.do("version\r\n", "VERSION "+DefaultVersion+"\r\n")
	mu.Lock()
	if len(got) != 2 || got[0].Action != ActionFlushAll || got[0].Delay != 0 || got[1].Delay != 100 ||
		!strings.HasPrefix(got[0].Remote, "127.0.0.1:") {
		t.Fatalf("audited: %+v", got)
	}
	fail = errors.New("audit: closed")
	mu.Unlock()

	c.do("set k 0 0 1\r\nv\r\n", "STORED\r\n")
	c.do("flush_all\r\n", "SERVER_ERROR audit log unavailable\r\n")
	c.do("flush_all noreply\r\n", "")
	c.do("get k\r\n", "VALUE k 0 1\r\nv\r\nEND\r\n")
	if s := c.stats(); s["cmd_flush"] != "4" {
		t.Fatalf("cmd_flush %s", s["cmd_flush"])
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 {
		t.Fatalf("refused flush_all audited: %+v", got)
	}
}
