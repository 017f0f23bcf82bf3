package kv_test

import (
	"context"
	"encoding/binary"
	"slices"
	"testing"

	"github.com/couchbase/gocbcore/v10/memd"

	"github.com/mayflydb/mayfly/engine"
)

// A write's durability frame is taken (HELLO offers sync replication), its
// level raises the bucket's durabilityMinLevel and never lowers it, and a
// level that is not one of the three is refused with
// DURABILITY_INVALID_LEVEL, writing nothing.
func TestDurabilityFrame(t *testing.T) {
	f := newFixture(t)
	c := f.dial(t)
	if got := c.hello(memd.FeatureAltRequests, memd.FeatureSyncReplication); !slices.Contains(got, memd.FeatureSyncReplication) {
		t.Fatalf("HELLO took %v, not sync replication", got)
	}
	c.mc.EnableFeature(memd.FeatureAltRequests)
	c.mc.EnableFeature(memd.FeatureSyncReplication)
	c.login(adminUser, adminPass)
	ext := binary.BigEndian.AppendUint64(nil, 0) // flags 0, expiry 0
	onDisk := func() bool {
		st := f.bucket.Stats()
		return st.QueueSize+st.FlusherTodo == 0
	}
	set := func(key string, level memd.DurabilityLevel, want memd.StatusCode) {
		t.Helper()
		c.expect(&memd.Packet{Command: memd.CmdSet, Key: []byte(key), Value: []byte(`1`), Extras: ext,
			DurabilityLevelFrame: &memd.DurabilityLevelFrame{DurabilityLevel: level}}, want)
	}
	for _, bad := range []memd.DurabilityLevel{0, 4, 0xff} {
		set("bad", bad, memd.StatusDurabilityInvalidLevel)
	}
	if _, err := f.bucket.DefaultCollection().Get(context.Background(), "bad"); err == nil {
		t.Error("a write with an invalid durability level was stored")
	}
	// The bucket's minimum is persistToMajority: majority is raised to it.
	set("k", memd.DurabilityLevelMajority, memd.StatusSuccess)
	if !onDisk() {
		t.Error("majority over a persistToMajority bucket answered before its commit")
	}
	// Over a bucket at none, the frame raises the level to the disk.
	if _, _, err := f.bucket.UpdateSettings(context.Background(), func(s *engine.BucketSettings) error {
		s.DurabilityMinLevel = engine.DurabilityNone
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for i, level := range []memd.DurabilityLevel{memd.DurabilityLevelMajorityAndPersistOnMaster, memd.DurabilityLevelPersistToMajority} {
		set("p", level, memd.StatusSuccess)
		if !onDisk() {
			t.Errorf("level %d over a bucket at none answered before its commit", i+2)
		}
	}
	c.expect(&memd.Packet{Command: memd.CmdDelete, Key: []byte("p"),
		DurabilityLevelFrame: &memd.DurabilityLevelFrame{DurabilityLevel: memd.DurabilityLevelPersistToMajority}}, memd.StatusSuccess)
	if !onDisk() {
		t.Error("a delete at persistToMajority answered before its commit")
	}
}
