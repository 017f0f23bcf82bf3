package sdktest

import (
	"testing"
	"time"

	"github.com/couchbase/gocb/v2"
)

// While a document is locked (GetAndLock), LookupIn and LookupInAnyReplica
// show its CAS as 0xffffffffffffffff, as Get and Exists do and as
// Couchbase's sub-document lookups do (they read through the same get,
// which hides a locked item's CAS). A review found them showing the real
// CAS, handing out a CAS Get would never give while the lock holds.
func TestLookupInOfLockedDocumentHidesCAS(t *testing.T) {
	s := start(t)
	_, coll := s.connect(t, user, password)
	if _, err := coll.Upsert("h", map[string]int{"rooms": 3}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.GetAndLock("h", 15*time.Second, nil); err != nil {
		t.Fatal(err)
	}
	const hidden = gocb.Cas(0xffffffffffffffff)
	g, err := coll.Get("h", nil)
	if err != nil || g.Cas() != hidden {
		t.Fatalf("Get of the locked document: CAS %x, %v (want %x)", g.Cas(), err, hidden)
	}
	specs := []gocb.LookupInSpec{gocb.GetSpec("rooms", nil)}
	li, err := coll.LookupIn("h", specs, nil)
	if err != nil {
		t.Fatalf("LookupIn of the locked document: %v", err)
	}
	if li.Cas() != hidden {
		t.Errorf("LookupIn of the locked document: CAS %x, want %x as Get shows", li.Cas(), hidden)
	}
	lr, err := coll.LookupInAnyReplica("h", specs, &gocb.LookupInAnyReplicaOptions{Timeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("LookupInAnyReplica of the locked document: %v", err)
	}
	if lr.Cas() != hidden {
		t.Errorf("LookupInAnyReplica of the locked document: CAS %x, want %x as Get shows", lr.Cas(), hidden)
	}
}
