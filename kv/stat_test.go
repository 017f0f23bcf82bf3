package kv_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/couchbase/gocbcore/v10/memd"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/internal/cbstats"
	"github.com/mayflydb/mayfly/kv"
	"github.com/mayflydb/mayfly/pager"
)

// stats sends STAT for group and reads the answers up to the empty one
// that ends them.
func (c *client) stats(group string) (map[string]string, []string) {
	c.t.Helper()
	op := c.send(&memd.Packet{Command: memd.CmdStat, Key: []byte(group)})
	out := map[string]string{}
	var order []string
	for {
		r := c.read()
		if r.Opaque != op || r.Command != memd.CmdStat || r.Status != memd.StatusSuccess {
			c.t.Fatalf("STAT %q: %v %v opaque %d (%s)", group, r.Command, r.Status, r.Opaque, r.Value)
		}
		if len(r.Key) == 0 && len(r.Value) == 0 {
			return out, order
		}
		out[string(r.Key)] = string(r.Value)
		order = append(order, string(r.Key))
	}
}

// STAT answers the selected bucket's statistics under the names `mayfly
// stats` prints, the pager's included; a group Mayfly does not keep is
// KEY_ENOENT and the connection goes on.
func TestStat(t *testing.T) {
	f := newFixture(t, func(o *kv.Options) {
		o.PagerStats = func(string) (pager.Stats, error) {
			return pager.Stats{LastRunDurationMS: 7, NextRun: 1_700_000_600}, nil
		}
	})
	ctx := context.Background()
	coll := f.bucket.DefaultCollection()
	for i, exp := range []int64{0, 0, 100} {
		if _, err := coll.Upsert(ctx, "k"+strconv.Itoa(i), []byte(`{}`), &engine.WriteOptions{Expiry: exp}); err != nil {
			t.Fatal(err)
		}
	}
	f.clock.Advance(200)
	if _, err := coll.Get(ctx, "k2"); err == nil {
		t.Fatal("k2 should have expired")
	}
	// The read queued k2's expiration without waiting for its commit;
	// the tombstone and sizes below count once it is committed.
	if err := f.bucket.Sync(ctx); err != nil {
		t.Fatal(err)
	}

	c := f.dial(t)
	c.hello(memd.FeatureXerror)
	c.expect(&memd.Packet{Command: memd.CmdSASLAuth, Key: []byte("PLAIN"), Value: []byte("\x00" + readerUser + "\x00" + readerPass)}, memd.StatusSuccess)
	c.expect(&memd.Packet{Command: memd.CmdStat}, memd.StatusNoBucket)
	c.expect(&memd.Packet{Command: memd.CmdSelectBucket, Key: []byte(bucketName)}, memd.StatusSuccess)

	got, order := c.stats("")
	want := cbstats.Bucket(f.bucket, func(string) (pager.Stats, error) {
		return pager.Stats{LastRunDurationMS: 7, NextRun: 1_700_000_600}, nil
	})
	if len(got) != len(want) {
		t.Errorf("STAT gave %d statistics, the HTTP API's stats have %d", len(got), len(want))
	}
	for name, v := range want {
		if got[name] != strconv.FormatInt(v, 10) {
			t.Errorf("%s = %q, want %d", name, got[name], v)
		}
	}
	if got["curr_items"] != "2" || got["ep_expired_access"] != "1" || got["ep_pager_last_run_duration_ms"] != "7" {
		t.Errorf("curr_items %s, ep_expired_access %s, ep_pager_last_run_duration_ms %s", got["curr_items"], got["ep_expired_access"], got["ep_pager_last_run_duration_ms"])
	}
	for i := 1; i < len(order); i++ {
		if order[i-1] >= order[i] {
			t.Fatalf("statistics out of name order: %q before %q", order[i-1], order[i])
		}
	}

	mem, _ := c.stats("memory")
	if len(mem) != len(cbstats.Memory) || mem["mem_used"] != got["mem_used"] || mem["ep_max_size"] == "" {
		t.Errorf("STAT memory: %v", mem)
	}
	if w, _ := c.stats("warmup"); w["ep_warmup_thread"] != "complete" {
		t.Errorf("STAT warmup: %v", w)
	}
	c.expect(&memd.Packet{Command: memd.CmdStat, Key: []byte("vbucket-details 0")}, memd.StatusKeyNotFound)
	c.expect(&memd.Packet{Command: memd.CmdNoop}, memd.StatusSuccess)
}
