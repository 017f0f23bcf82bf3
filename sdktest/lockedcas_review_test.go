package sdktest

import (
	"testing"
	"time"

	"github.com/couchbase/gocb/v2"
)

// Bug: while a document is locked (GetAndLock), gocb's Get and Exists show
// its CAS as 0xffffffffffffffff, as Couchbase shows it to everyone but the
// lock's holder, but LookupIn and LookupInAnyReplica
// (SUBDOC_MULTI_LOOKUP, kv/subdoc.go replies d.CAS) show the document's
// real CAS. Couchbase's sub-document lookup reads through the same get
// (StoredValue::toItem with HideLockedCas::Yes when the item is locked), so
// its CAS is hidden the same way. A client that tells a locked document by
// its CAS (Get's convention) does not see the lock through LookupIn, and a
// lookup hands out a CAS that Get would never give while the lock holds.
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
