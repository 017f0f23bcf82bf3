package kv_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/couchbase/gocbcore/v10/memd"

	"github.com/mayflydb/mayfly/engine"
)

// TestEphemeralNoEvictionOnTheKVPort: an ephemeral bucket with
// evictionPolicy noEviction refuses a write past its quota with Couchbase's
// out-of-memory status (ENOMEM, which the error map marks temporary and
// retry-later, so an SDK backs off and retries), not an internal error
// (which an SDK gives up on at once); nothing stored is lost, and a delete
// makes room again.
func TestEphemeralNoEvictionOnTheKVPort(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	if _, err := f.eng.CreateBucket(ctx, engine.BucketSettings{Name: "eph", Type: engine.Ephemeral, RAMQuotaMB: 1}); err != nil {
		t.Fatal(err)
	}
	c := f.dial(t)
	c.hello(memd.FeatureXerror)
	c.login(adminUser, adminPass)
	c.expect(&memd.Packet{Command: memd.CmdSelectBucket, Key: []byte("eph")}, memd.StatusSuccess)
	value := []byte(strings.Repeat("v", 400))
	n := 0
	var refused *memd.Packet
	for ; n < 10000; n++ {
		r := c.do(&memd.Packet{Command: memd.CmdSet, Key: []byte(fmt.Sprint("k", n)), Value: value, Extras: make([]byte, 8)})
		if r.Status != memd.StatusSuccess {
			refused = r
			break
		}
	}
	if refused == nil {
		t.Fatal("10000 sets of 400 bytes fit a 1 MiB quota")
	}
	if refused.Status != memd.StatusOutOfMemory {
		t.Fatalf("set %d past the quota: status %v (%q), want %v (ENOMEM)", n, refused.Status, refused.Value, memd.StatusOutOfMemory)
	}
	b, err := f.eng.Bucket("eph")
	if err != nil {
		t.Fatal(err)
	}
	if st := b.Stats(); st.CurrItems != int64(n) || st.TmpOOMErrors != 1 {
		t.Errorf("after %d stored and one refused: curr_items %d, ep_tmp_oom_errors %d", n, st.CurrItems, st.TmpOOMErrors)
	}
	r := c.expect(&memd.Packet{Command: memd.CmdGet, Key: []byte("k0")}, memd.StatusSuccess)
	if string(r.Value) != string(value) {
		t.Errorf("k0 after the refusal: %.20q", r.Value)
	}
	c.expect(&memd.Packet{Command: memd.CmdDelete, Key: []byte("k0")}, memd.StatusSuccess)
	c.expect(&memd.Packet{Command: memd.CmdSet, Key: []byte("again"), Value: value, Extras: make([]byte, 8)}, memd.StatusSuccess)
}
