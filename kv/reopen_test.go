package kv_test

import (
	"context"
	"testing"

	"github.com/couchbase/gocbcore/v10/memd"

	"github.com/mayflydb/mayfly/engine"
)

// TestSelectedBucketFollowsRestart: a connection that selected a bucket
// goes on with it after the bucket restarts (a change of its
// evictionPolicy replaces the engine's Bucket): a read answers the
// document, not a temporary failure for ever. On the old code the change
// was refused; without following the restart the read answers TMPFAIL.
func TestSelectedBucketFollowsRestart(t *testing.T) {
	f := newFixture(t)
	c := f.dial(t)
	c.hello(memd.FeatureXerror, memd.FeatureJSON)
	c.login(adminUser, adminPass)
	c.set(memd.CmdSet, "k", `{"a":1}`, 0, 0, 0, memd.StatusSuccess)
	if _, _, err := f.bucket.UpdateSettings(context.Background(), func(s *engine.BucketSettings) error {
		s.EvictionPolicy = engine.FullEviction
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if nb := f.bucket.Reopened(); nb == nil {
		t.Fatal("the bucket did not restart")
	} else if err := nb.WaitWarm(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := c.expect(&memd.Packet{Command: memd.CmdGet, Key: []byte("k")}, memd.StatusSuccess)
	if string(r.Value) != `{"a":1}` {
		t.Fatalf("GET after the restart: %q", r.Value)
	}
	c.set(memd.CmdSet, "k2", "v", 0, 0, 0, memd.StatusSuccess)
}
