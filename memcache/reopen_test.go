package memcache

import (
	"context"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// A couchbase bucket restarts when its evictionPolicy changes; the port
// serving it follows it to its replacement (the KV port's connections do the
// same): documents stored before read back, writes go on, and a settings
// change of the new bucket (its durabilityMinLevel) reaches the port. On the
// old code every command after the restart answered "the bucket is closed".
func TestPortFollowsBucketRestart(t *testing.T) {
	ctx := context.Background()
	eng, err := engine.Open(t.TempDir(), &engine.Options{Clock: engine.NewFakeClock(t0), NumPartitions: 64, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "r", RAMQuotaMB: 100})
	if err != nil {
		t.Fatal(err)
	}
	srv, addr, done := serve(t, b, nil)
	defer func() {
		srv.Close()
		<-done
		eng.Close()
	}()
	c := dialAddr(t, addr)
	c.do("set a 5 0 3\r\nabc\r\n", "STORED\r\n")
	if !srv.writesWait.Load() {
		t.Fatal("a write at the bucket's default level (persistToMajority) should wait for the disk")
	}
	if _, _, err := b.UpdateSettings(ctx, func(s *engine.BucketSettings) error { s.EvictionPolicy = engine.FullEviction; return nil }); err != nil {
		t.Fatal(err)
	}
	nb, err := eng.Bucket("r")
	if err != nil || nb == b {
		t.Fatalf("the bucket did not restart: %v", err)
	}
	c.do("get a\r\n", "VALUE a 5 3\r\nabc\r\nEND\r\n")
	c.do("set b 0 0 2\r\nxy\r\n", "STORED\r\n")
	if d, err := nb.DefaultCollection().Get(ctx, "b"); err != nil || string(d.Value) != "xy" {
		t.Fatalf("the write after the restart, read from the new bucket: %v %v", d, err)
	}
	if _, _, err := nb.UpdateSettings(ctx, func(s *engine.BucketSettings) error { s.DurabilityMinLevel = engine.DurabilityNone; return nil }); err != nil {
		t.Fatal(err)
	}
	if srv.writesWait.Load() {
		t.Error("the new bucket's durabilityMinLevel none did not reach the port")
	}
}
