package memcache

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// A bucket deleted and created again under its name is served by the port
// from its creation on, on the connections open before as on new ones,
// when Options.Lookup finds it; while there is none, every command on the
// bucket's documents is answered with a clear error and does nothing, and
// the others (version) still work. The new bucket's settings reach the
// port (its durabilityMinLevel). On the old code every command after the
// deletion answered "the bucket is closed", for good.
func TestPortFollowsBucketCreatedAgain(t *testing.T) {
	ctx := context.Background()
	eng, err := engine.Open(t.TempDir(), &engine.Options{Clock: engine.NewFakeClock(t0), NumPartitions: 64, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "default", RAMQuotaMB: 100})
	if err != nil {
		t.Fatal(err)
	}
	srv, addr, done := serve(t, b, &Options{MaxItemSize: 1024, Lookup: func() (*engine.Bucket, error) { return eng.Bucket("default") }})
	defer func() {
		srv.Close()
		<-done
		eng.Close()
	}()
	old := dialAddr(t, addr)
	old.do("set a 0 0 3\r\nabc\r\n", "STORED\r\n")
	if !srv.writesWait.Load() {
		t.Fatal("a write at the bucket's default level (persistToMajority) should wait for the disk")
	}

	if err := eng.DeleteBucket(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	const gone = "SERVER_ERROR bucket not found: default\r\n"
	old.do("get a\r\n", gone)
	fresh := dialAddr(t, addr)
	fresh.do("set a 0 0 3\r\nxyz\r\n", gone)
	fresh.do("set a 0 0 3 noreply\r\nxyz\r\n", "")
	// An item over MaxItemSize: its data is swallowed, not read as commands.
	fresh.do("set big 0 0 2000\r\n"+strings.Repeat("x", 2000)+"\r\n", gone)
	fresh.do("incr n 1\r\n", gone)
	fresh.do("flush_all\r\n", gone)
	fresh.do("version\r\n", "VERSION "+DefaultVersion+"\r\n")

	nb, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "default", RAMQuotaMB: 100, DurabilityMinLevel: engine.DurabilityNone})
	if err != nil {
		t.Fatal(err)
	}
	old.do("get a\r\n", "END\r\n") // the new bucket is empty
	old.do("set b 0 0 2\r\nxy\r\n", "STORED\r\n")
	fresh.do("get b\r\n", "VALUE b 0 2\r\nxy\r\nEND\r\n")
	dialAddr(t, addr).do("gets a b\r\n", "VALUE b 0 2 "+casOf(t, nb, "b")+"\r\nxy\r\nEND\r\n")
	if d, err := nb.DefaultCollection().Get(ctx, "b"); err != nil || string(d.Value) != "xy" {
		t.Fatalf("the write after the bucket's creation, read from it: %v %v", d, err)
	}
	if srv.writesWait.Load() {
		t.Error("the new bucket's durabilityMinLevel none did not reach the port")
	}
}

// casOf returns key's CAS in b's default collection, as gets shows it.
func casOf(t *testing.T, b *engine.Bucket, key string) string {
	t.Helper()
	d, err := b.DefaultCollection().Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return strconv.FormatUint(d.CAS, 10)
}

// A port made before its bucket exists (New(nil) with Lookup and Clock, as
// serve does when --memcached-bucket names none yet) answers each command
// on documents with the bucket's absence, shows an empty bucket in stats,
// and serves the bucket from its creation on; the old code had New refuse
// a nil bucket, so serve did not start.
func TestPortStartsBeforeItsBucket(t *testing.T) {
	ctx := context.Background()
	eng, err := engine.Open(t.TempDir(), &engine.Options{Clock: engine.NewFakeClock(t0), NumPartitions: 64, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	srv, addr, done := serve(t, nil, &Options{Clock: eng.Clock(), BucketName: "default",
		Lookup: func() (*engine.Bucket, error) { return eng.Bucket("default") }})
	defer func() {
		srv.Close()
		<-done
		eng.Close()
	}()
	c := dialAddr(t, addr)
	const gone = "SERVER_ERROR bucket not found: default\r\n"
	c.do("get a\r\n", gone)
	c.do("set a 0 0 3\r\nabc\r\n", gone)
	c.do("stats warmup\r\n", "END\r\n")
	c.do("version\r\n", "VERSION "+DefaultVersion+"\r\n")
	if _, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "default", RAMQuotaMB: 100, DurabilityMinLevel: engine.DurabilityNone}); err != nil {
		t.Fatal(err)
	}
	c.do("set a 0 0 3\r\nabc\r\n", "STORED\r\n")
	dialAddr(t, addr).do("get a\r\n", "VALUE a 0 3\r\nabc\r\nEND\r\n")
}
