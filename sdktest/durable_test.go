package sdktest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/couchbase/gocb/v2"

	"github.com/mayflydb/mayfly/engine"
)

// gocb's synchronous durability levels succeed on one node, and the write
// is there to read; a level an ephemeral bucket cannot meet (it keeps
// nothing on disk) is refused, as Couchbase refuses it.
func TestDurableWrites(t *testing.T) {
	s := start(t)
	_, coll := s.connect(t, user, password)
	for _, lvl := range []gocb.DurabilityLevel{gocb.DurabilityLevelMajority, gocb.DurabilityLevelMajorityAndPersistOnMaster, gocb.DurabilityLevelPersistToMajority} {
		res, err := coll.Upsert("d1", hotel{"Durable", int(lvl)}, &gocb.UpsertOptions{DurabilityLevel: lvl, Timeout: 30 * time.Second})
		if err != nil {
			t.Fatalf("upsert at level %d: %v", lvl, err)
		}
		got, err := coll.Get("d1", nil)
		var h hotel
		if err != nil || got.Content(&h) != nil || h.Stars != int(lvl) || got.Cas() != res.Cas() {
			t.Fatalf("get after a write at level %d: %+v %v", lvl, h, err)
		}
	}

	eph := engine.DefaultBucketSettings("sessions")
	eph.Type = engine.Ephemeral
	if _, err := s.eng.CreateBucket(context.Background(), eph); err != nil {
		t.Fatal(err)
	}
	cl, _ := s.connect(t, adminUser, adminPassword)
	ecoll := cl.Bucket("sessions").DefaultCollection()
	if _, err := ecoll.Upsert("e1", hotel{"Ephemeral", 1}, &gocb.UpsertOptions{DurabilityLevel: gocb.DurabilityLevelMajority, Timeout: 30 * time.Second}); err != nil {
		t.Fatalf("majority on an ephemeral bucket: %v", err)
	}
	_, err := ecoll.Upsert("e2", hotel{"Ephemeral", 2}, &gocb.UpsertOptions{DurabilityLevel: gocb.DurabilityLevelPersistToMajority, Timeout: 30 * time.Second})
	if !errors.Is(err, gocb.ErrDurabilityLevelNotAvailable) {
		t.Fatalf("persistToMajority on an ephemeral bucket: %v, want ErrDurabilityLevelNotAvailable", err)
	}
	if _, err := ecoll.Get("e2", nil); !errors.Is(err, gocb.ErrDocumentNotFound) {
		t.Fatalf("a refused durable write was stored: %v", err)
	}
}
