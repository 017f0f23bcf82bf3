package sdktest

import (
	"errors"
	"testing"
	"time"

	"github.com/couchbase/gocb/v2"
)

// gocb's legacy durability (PersistTo, ReplicateTo) polls OBSERVE_SEQNO
// until the write's sequence number is persisted (and replicated) on
// enough copies: on one node, PersistTo: 1 succeeds once the write is
// on disk, and the document reads back; GetAllReplicas reads the active
// copy (no replicas). Before, OBSERVE_SEQNO was UNKNOWN_COMMAND, which
// gocb ignores: the upsert, applied, ended in ErrAmbiguousTimeout after
// its timeout.
func TestLegacyDurability(t *testing.T) {
	s := start(t)
	_, coll := s.connect(t, user, password)
	for i, o := range []gocb.UpsertOptions{{PersistTo: 1}, {ReplicateTo: 0, PersistTo: 1}, {ReplicateTo: 0}} {
		o.Timeout = 30 * time.Second // a hang guard: the poll answers within milliseconds
		res, err := coll.Upsert("legacy", hotel{"Legacy", i}, &o)
		if err != nil {
			t.Fatalf("upsert with PersistTo %d ReplicateTo %d: %v", o.PersistTo, o.ReplicateTo, err)
		}
		got, err := coll.Get("legacy", nil)
		var h hotel
		if err != nil || got.Content(&h) != nil || h.Stars != i || got.Cas() != res.Cas() {
			t.Fatalf("get after a PersistTo write: %+v %v", h, err)
		}
	}
	// More copies than a single node has: refused at once, as Couchbase's SDK does.
	if _, err := coll.Upsert("legacy", hotel{"Legacy", 9}, &gocb.UpsertOptions{PersistTo: 2, Timeout: 30 * time.Second}); !errors.Is(err, gocb.ErrDurabilityImpossible) {
		t.Fatalf("PersistTo: 2 on one node: %v, want ErrDurabilityImpossible", err)
	}
	all, err := coll.GetAllReplicas("legacy", &gocb.GetAllReplicaOptions{Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for r := all.Next(); r != nil; r = all.Next() {
		n++
		if r.IsReplica() {
			t.Errorf("a single node answered a replica read")
		}
	}
	if n != 1 {
		t.Fatalf("GetAllReplicas on one node: %d results, want 1", n)
	}
}
