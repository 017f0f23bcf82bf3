package kv_test

import (
	"context"
	"encoding/binary"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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

// rawSet writes a SET with framing extras frames (alternative request
// framing) as bytes, so that a frame memd would not encode can be sent.
func (c *client) rawSet(frames []byte, key, value string) uint32 {
	c.t.Helper()
	c.opaque++
	ext := make([]byte, 8) // flags 0, expiry 0
	h := make([]byte, 24)
	h[0], h[1], h[2], h[3], h[4] = 0x08, byte(memd.CmdSet), byte(len(frames)), byte(len(key)), byte(len(ext))
	binary.BigEndian.PutUint32(h[8:], uint32(len(frames)+len(ext)+len(key)+len(value)))
	binary.BigEndian.PutUint32(h[12:], c.opaque)
	b := append(append(append(append(h, frames...), ext...), key...), value...)
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatal(err)
	}
	return c.opaque
}

// A durability frame of a size other than 1 (level) or 3 (level and
// timeout) is refused with EINVAL, as Couchbase refuses it ("Invalid sized
// buffer provided"), and writes nothing: it was taken as an unknown frame and
// ignored, so the write went ahead at the bucket's minimum level and answered
// success, the level asked for never applied.
func TestDurabilityFrameOfBadSize(t *testing.T) {
	f := newFixture(t)
	c := f.dial(t)
	c.hello(memd.FeatureAltRequests, memd.FeatureSyncReplication, memd.FeatureXerror)
	c.login(adminUser, adminPass)
	for _, body := range [][]byte{{}, {3, 0}, {3, 0, 100, 0}} {
		frames := append([]byte{1<<4 | byte(len(body))}, body...)
		op := c.rawSet(frames, "bad", "1")
		r := c.read()
		if r.Opaque != op || r.Status != memd.StatusInvalidArgs {
			t.Errorf("SET with a durability frame of %d bytes: status %v (%s), want %v", len(body), r.Status, r.Value, memd.StatusInvalidArgs)
		}
	}
	if _, err := f.bucket.DefaultCollection().Get(context.Background(), "bad"); err == nil {
		t.Error("a write with a durability frame of a bad size was stored")
	}
	// The connection goes on; sizes 1 and 3 are taken.
	for _, body := range [][]byte{{3}, {3, 0, 100}} {
		op := c.rawSet(append([]byte{1<<4 | byte(len(body))}, body...), "good", "1")
		if r := c.read(); r.Opaque != op || r.Status != memd.StatusSuccess {
			t.Errorf("SET with a durability frame of %d bytes: status %v (%s), want success", len(body), r.Status, r.Value)
		}
	}
}

// A durability frame on a command that writes nothing (a get, a lookup, a
// lock or unlock, GET_META, a NOOP or a cluster configuration) is refused
// with EINVAL, as Couchbase refuses it
// ("The requested command does not support durability requirements"); the
// writes that take one (touch and get-and-touch included) go ahead.
func TestDurabilityFrameOnACommandThatCannotTakeOne(t *testing.T) {
	f := newFixture(t)
	c := f.dial(t)
	c.hello(memd.FeatureAltRequests, memd.FeatureSyncReplication, memd.FeatureXerror)
	c.mc.EnableFeature(memd.FeatureAltRequests)
	c.mc.EnableFeature(memd.FeatureSyncReplication)
	c.login(adminUser, adminPass)
	cas := c.set(memd.CmdSet, "k", `{"a":1}`, 0, 0, 0, memd.StatusSuccess)
	frame := func() *memd.DurabilityLevelFrame {
		return &memd.DurabilityLevelFrame{DurabilityLevel: memd.DurabilityLevelMajority}
	}
	for _, p := range []*memd.Packet{
		{Command: memd.CmdGet, Key: []byte("k")},
		{Command: memd.CmdGetMeta, Key: []byte("k")},
		{Command: memd.CmdSubDocGet, Key: []byte("k"), Extras: []byte{0, 1, 0}, Value: []byte("a")},
		{Command: memd.CmdGetLocked, Key: []byte("k"), Extras: binary.BigEndian.AppendUint32(nil, 5)},
		{Command: memd.CmdUnlockKey, Key: []byte("k"), Cas: cas},
		{Command: memd.CmdNoop},
		{Command: memd.CmdGetClusterConfig},
		{Command: memd.CmdCollectionsGetManifest},
	} {
		p.DurabilityLevelFrame = frame()
		c.expect(p, memd.StatusInvalidArgs)
	}
	// Nothing was locked by the refused GET_LOCKED: a write goes ahead.
	c.set(memd.CmdSet, "k", `{"a":2}`, 0, 0, cas, memd.StatusSuccess)
	for _, p := range []*memd.Packet{
		{Command: memd.CmdTouch, Key: []byte("k"), Extras: make([]byte, 4)},
		{Command: memd.CmdGAT, Key: []byte("k"), Extras: make([]byte, 4)},
		{Command: memd.CmdDelete, Key: []byte("k")},
	} {
		p.DurabilityLevelFrame = frame()
		c.expect(p, memd.StatusSuccess)
	}
}

// A write's durability timeout (the frame's 2 bytes) bounds its wait for
// the level: a persisting write whose commit has not come by then answers
// SYNC_WRITE_AMBIGUOUS, as Couchbase answers a sync write past its
// timeout (the SDK raises its durability-ambiguous error and does not
// retry), and the write is not lost: it commits when the disk lets it. The
// timeout was ignored, the answer waiting for the commit however long it
// took.
func TestDurabilityFrameTimeout(t *testing.T) {
	ctx := context.Background()
	var block atomic.Bool
	gate := make(chan struct{})
	var release sync.Once
	open := func() { release.Do(func() { close(gate) }) }
	eng, err := engine.Open(t.TempDir(), &engine.Options{NumPartitions: 8, NoSync: true,
		CommitHook: func(string) {
			if block.Load() {
				<-gate
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := eng.CreateBucket(ctx, engine.DefaultBucketSettings(bucketName))
	if err != nil {
		t.Fatal(err)
	}
	f := serveEngine(t, eng, open)
	c := f.dial(t)
	c.hello(memd.FeatureAltRequests, memd.FeatureSyncReplication, memd.FeatureXerror)
	c.mc.EnableFeature(memd.FeatureAltRequests)
	c.mc.EnableFeature(memd.FeatureSyncReplication)
	c.login(adminUser, adminPass)
	ext := binary.BigEndian.AppendUint64(nil, 0)
	set := func(key string, timeout time.Duration) *memd.Packet {
		p := &memd.Packet{Command: memd.CmdSet, Key: []byte(key), Value: []byte(`1`), Extras: ext,
			DurabilityLevelFrame: &memd.DurabilityLevelFrame{DurabilityLevel: memd.DurabilityLevelPersistToMajority}}
		if timeout > 0 {
			p.DurabilityTimeoutFrame = &memd.DurabilityTimeoutFrame{DurabilityTimeout: timeout}
		}
		return c.do(p)
	}
	// With the disk keeping up, the timeout changes nothing.
	if r := set("k0", 10*time.Second); r.Status != memd.StatusSuccess {
		t.Fatalf("SET with a durability timeout: %v (%s)", r.Status, r.Value)
	}
	block.Store(true) // commits wait for the gate
	if r := set("k1", time.Millisecond); r.Status != memd.StatusSyncWriteAmbiguous {
		t.Fatalf("SET at persistToMajority, commits held, 1 ms timeout: %v (%s), want %v", r.Status, r.Value, memd.StatusSyncWriteAmbiguous)
	}
	open()
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if d, err := b.DefaultCollection().Get(ctx, "k1"); err != nil || string(d.Value) != "1" {
		t.Fatalf("the write answered ambiguous: %v %v, want it committed once the disk let it", d, err)
	}
}

// A durable write to a memcached bucket is refused NOT_SUPPORTED, as
// Couchbase's memcached engine answers it, and writes nothing: Mayfly took
// majority there while the bucket's durabilityMinLevel refuses it.
func TestDurabilityFrameOnMemcachedBucket(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	b, err := f.eng.CreateBucket(ctx, engine.BucketSettings{Name: "mc", Type: engine.Memcached})
	if err != nil {
		t.Fatal(err)
	}
	c := f.dial(t)
	c.hello(memd.FeatureAltRequests, memd.FeatureSyncReplication, memd.FeatureXerror)
	c.mc.EnableFeature(memd.FeatureAltRequests)
	c.mc.EnableFeature(memd.FeatureSyncReplication)
	c.login(adminUser, adminPass)
	c.expect(&memd.Packet{Command: memd.CmdSelectBucket, Key: []byte("mc")}, memd.StatusSuccess)
	ext := make([]byte, 8)
	for _, level := range []memd.DurabilityLevel{memd.DurabilityLevelMajority, memd.DurabilityLevelPersistToMajority} {
		c.expect(&memd.Packet{Command: memd.CmdSet, Key: []byte("k"), Value: []byte(`1`), Extras: ext,
			DurabilityLevelFrame: &memd.DurabilityLevelFrame{DurabilityLevel: level}}, memd.StatusNotSupported)
	}
	if _, err := b.DefaultCollection().Get(ctx, "k"); err == nil {
		t.Error("a durable write to a memcached bucket was stored")
	}
	c.expect(&memd.Packet{Command: memd.CmdSet, Key: []byte("k"), Value: []byte(`1`), Extras: ext}, memd.StatusSuccess)
}
