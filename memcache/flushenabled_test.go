package memcache

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// setFlushEnabled turns the fixture bucket's flushEnabled on or off, as the
// REST API's bucket edit does.
func (f *fixture) setFlushEnabled(t *testing.T, on bool) {
	t.Helper()
	if _, _, err := f.bucket.UpdateSettings(context.Background(), func(s *engine.BucketSettings) error {
		s.FlushEnabled = on
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestFlushAllDisabled: on a bucket whose flushEnabled is off (the REST
// API's doFlush then answers "Flush is disabled"), flush_all is refused
// with memcached's answer for a disabled flush_all, is neither audited nor
// run, and deletes nothing; a delayed one accepted while flush was enabled
// is dropped if flush is disabled before its moment. "stats settings"
// says flush_enabled no while it is refused, as memcached -F does.
func TestFlushAllDisabled(t *testing.T) {
	var audited atomic.Int32
	f := newFixture(t, &Options{Audit: func(context.Context, AuditEvent) error {
		audited.Add(1)
		return nil
	}})
	f.setFlushEnabled(t, false)
	c := f.dial(t)
	// memcached's stats settings say flush_enabled no when -F refuses it.
	if got := c.settingsStats()["flush_enabled"]; got != "no" {
		t.Errorf("stats settings: flush_enabled %q on a bucket whose flush is disabled, want no", got)
	}
	c.do("set k 0 0 1\r\nv\r\n", "STORED\r\n")
	c.do("flush_all\r\n", "CLIENT_ERROR flush_all not allowed\r\n")
	c.do("flush_all 0\r\n", "CLIENT_ERROR flush_all not allowed\r\n")
	c.do("flush_all 10\r\n", "CLIENT_ERROR flush_all not allowed\r\n")
	c.do("flush_all noreply\r\n", "")
	f.clock.Advance(20)
	c.do("get k\r\n", "VALUE k 0 1\r\nv\r\nEND\r\n")
	if s := c.stats(); s["cmd_flush"] != "4" {
		t.Errorf("cmd_flush %s, want 4 (memcached counts a refused flush_all)", s["cmd_flush"])
	}
	if n := audited.Load(); n != 0 {
		t.Errorf("%d refused flush_all audited", n)
	}

	// Accepted while enabled, dropped once disabled before its moment.
	f.setFlushEnabled(t, true)
	c.do("flush_all 10\r\n", "OK\r\n")
	f.setFlushEnabled(t, false)
	f.clock.Advance(20)
	c.do("get k\r\n", "VALUE k 0 1\r\nv\r\nEND\r\n")

	f.setFlushEnabled(t, true)
	if got := c.settingsStats()["flush_enabled"]; got != "yes" {
		t.Errorf("stats settings: flush_enabled %q on a bucket whose flush is enabled, want yes", got)
	}
	c.do("flush_all\r\n", "OK\r\n")
	c.do("get k\r\n", "END\r\n")
}

// TestFlushAllThroughOptionsFlush: with Options.Flush set (a cluster
// node's: the cluster flushes every node), flush_all runs it, not the
// bucket's own Flush, and answers OK once it returns; a flush that did not
// finish in time answers SERVER_ERROR with its reason (the flush goes on
// in the background), and deletes nothing here itself.
func TestFlushAllThroughOptionsFlush(t *testing.T) {
	var calls atomic.Int32
	var fail atomic.Bool
	f := newFixture(t, &Options{Flush: func(ctx context.Context, b *engine.Bucket) error {
		calls.Add(1)
		if fail.Load() {
			return engine.ErrFlushPending
		}
		_, err := b.Flush(ctx)
		return err
	}})
	c := f.dial(t)
	c.do("set k 0 0 1\r\nv\r\n", "STORED\r\n")
	fail.Store(true)
	c.do("flush_all\r\n", "SERVER_ERROR temporary failure: the flush did not finish in time; it goes on in the background\r\n")
	c.do("get k\r\n", "VALUE k 0 1\r\nv\r\nEND\r\n")
	fail.Store(false)
	c.do("flush_all\r\n", "OK\r\n")
	c.do("get k\r\n", "END\r\n")
	if n := calls.Load(); n != 2 {
		t.Errorf("Options.Flush ran %d times for two flush_all, want 2", n)
	}
}
