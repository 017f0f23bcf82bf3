package kv_test

import (
	"slices"
	"testing"

	"github.com/couchbase/gocbcore/v10/memd"

	"github.com/mayflydb/mayfly/kv"
)

// TestLookupInReplica: a sub-document lookup with the replica-read
// document flag (0x20, which gocb's LookupInAnyReplica and
// LookupInAllReplicas set on the lookups they send to a key's replicas)
// is answered, on a node holding a replica of the key's partition, from
// that copy: the document's paths, its $document virtual attributes and
// its CAS; a missing or expired document is not found. The partition's
// leader and a node holding no copy answer NOT_MY_VBUCKET with the
// configuration, as Couchbase's active does; the same lookup without the
// flag stays the leader's. HELLO accepts the feature (0x1c). Before, the
// flag was ignored: the replica refused the lookup NOT_MY_VBUCKET and the
// leader answered it.
func TestLookupInReplica(t *testing.T) {
	var f *fixture
	l := &layout{}
	l.set(1, 0)
	f = newFixture(t, func(o *kv.Options) { o.Topology = l.topology(&f) })
	c := f.dial(t)
	if got := c.hello(memd.FeatureXerror, memd.FeatureJSON, memd.FeatureXattr, memd.FeatureSubdocReplicaRead); !slices.Contains(got, memd.FeatureSubdocReplicaRead) {
		t.Fatalf("HELLO: %v, without subdoc replica reads", got)
	}
	c.login(adminUser, adminPass)
	// Written while this node still wrote locally: its copy holds them.
	cas := c.set(memd.CmdSet, "k", `{"a":{"b":[1,2]}}`, 7, 0, 0, memd.StatusSuccess)
	c.set(memd.CmdSet, "short", `{"v":2}`, 0, 10, 0, memd.StatusSuccess)
	f.bucket.SetReplicator(notLeader{})
	f.clock.Advance(11)

	body := slices.Concat(
		lookupSpec(memd.SubDocOpGet, false, "a.b"),
		lookupSpec(memd.SubDocOpGetCount, false, "a.b"),
		lookupSpec(memd.SubDocOpGet, true, "$document.flags"),
		lookupSpec(memd.SubDocOpGetDoc, false, ""),
	)
	replicaFlag := []byte{byte(memd.SubdocDocFlagReplicaRead)}
	lookup := func(key string, extras []byte, want memd.StatusCode) *memd.Packet {
		t.Helper()
		return c.expect(&memd.Packet{Command: memd.CmdSubDocMultiLookup, Key: []byte(key), Extras: extras, Value: body, Vbucket: uint16(f.bucket.PartitionOf(key))}, want)
	}
	r := lookup("k", replicaFlag, memd.StatusSuccess)
	sts, vs := lookupResults(t, r.Value)
	wantVs := []string{`[1,2]`, `2`, `7`, `{"a":{"b":[1,2]}}`}
	if r.Cas != cas || !slices.Equal(vs, wantVs) || slices.ContainsFunc(sts, func(s memd.StatusCode) bool { return s != memd.StatusSuccess }) {
		t.Fatalf("replica lookup: CAS %d (want %d), statuses %v, values %q (want %q)", r.Cas, cas, sts, vs, wantVs)
	}
	lookup("missing", replicaFlag, memd.StatusKeyNotFound)
	lookup("short", replicaFlag, memd.StatusKeyNotFound) // expired
	lookup("k", nil, memd.StatusNotMyVBucket)            // the leader's
	// The single-path lookup's document flags (its fourth byte of extras).
	g := c.expect(&memd.Packet{Command: memd.CmdSubDocGet, Key: []byte("k"), Extras: []byte{0, 3, 0, byte(memd.SubdocDocFlagReplicaRead)}, Value: []byte("a.b"), Vbucket: uint16(f.bucket.PartitionOf("k"))}, memd.StatusSuccess)
	if string(g.Value) != `[1,2]` {
		t.Fatalf("replica SUBDOC_GET: %q", g.Value)
	}

	l.set(0, 1) // this node leads: the active copy refuses replica reads
	if r := lookup("k", replicaFlag, memd.StatusNotMyVBucket); len(r.Value) == 0 {
		t.Fatal("NOT_MY_VBUCKET without the configuration")
	}
	l.set(1, -1) // no copy here
	lookup("k", replicaFlag, memd.StatusNotMyVBucket)
	c.expect(&memd.Packet{Command: memd.CmdNoop}, memd.StatusSuccess)
}

// TestLookupInReplicaSingleNode: a single node has no replicas: a
// replica-flagged lookup is NOT_MY_VBUCKET (an SDK reading a bucket
// without replicas reads the active copy alone, unflagged), while the
// same lookup unflagged is answered.
func TestLookupInReplicaSingleNode(t *testing.T) {
	f := newFixture(t)
	c := f.dial(t)
	c.login(adminUser, adminPass)
	c.set(memd.CmdSet, "k", `{"a":1}`, 0, 0, 0, memd.StatusSuccess)
	p := &memd.Packet{Command: memd.CmdSubDocMultiLookup, Key: []byte("k"), Extras: []byte{byte(memd.SubdocDocFlagReplicaRead)},
		Value: lookupSpec(memd.SubDocOpGet, false, "a"), Vbucket: uint16(f.bucket.PartitionOf("k"))}
	c.expect(p, memd.StatusNotMyVBucket)
	p.Extras = nil
	c.expect(p, memd.StatusSuccess)
}
