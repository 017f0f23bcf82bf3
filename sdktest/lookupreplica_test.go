package sdktest

import (
	"testing"
	"time"

	"github.com/couchbase/gocb/v2"
)

// gocb's LookupInAnyReplica and LookupInAllReplicas run on a bucket that
// offers sub-document replica reads (its configuration's
// "subdoc.ReplicaRead"): on a single node, which has no replicas, both
// read the active copy, one result, not a replica's. Before, gocb refused
// both with ErrFeatureNotAvailable before sending anything.
func TestLookupInReplicasSingleNode(t *testing.T) {
	s := start(t)
	_, coll := s.connect(t, user, password)
	if _, err := coll.Upsert("h", map[string]any{"name": "Ritz", "rooms": []int{101, 102}}, nil); err != nil {
		t.Fatal(err)
	}
	specs := []gocb.LookupInSpec{gocb.GetSpec("name", nil), gocb.CountSpec("rooms", nil)}
	check := func(what string, r *gocb.LookupInReplicaResult) {
		t.Helper()
		var name string
		var n int
		if err := r.ContentAt(0, &name); err != nil || name != "Ritz" {
			t.Fatalf("%s: name %q, %v", what, name, err)
		}
		if err := r.ContentAt(1, &n); err != nil || n != 2 {
			t.Fatalf("%s: count(rooms) %d, %v", what, n, err)
		}
		if r.IsReplica() {
			t.Fatalf("%s: a single node answered as a replica", what)
		}
	}
	to := 30 * time.Second // a hang guard: the answer comes at once
	first, err := coll.LookupInAnyReplica("h", specs, &gocb.LookupInAnyReplicaOptions{Timeout: to})
	if err != nil {
		t.Fatalf("LookupInAnyReplica: %v", err)
	}
	check("LookupInAnyReplica", first)
	all, err := coll.LookupInAllReplicas("h", specs, &gocb.LookupInAllReplicaOptions{Timeout: to})
	if err != nil {
		t.Fatalf("LookupInAllReplicas: %v", err)
	}
	n := 0
	for r := all.Next(); r != nil; r = all.Next() {
		n++
		check("LookupInAllReplicas", r)
	}
	if n != 1 {
		t.Fatalf("LookupInAllReplicas on one node: %d results, want 1", n)
	}
}
