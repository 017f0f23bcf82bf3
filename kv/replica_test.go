package kv_test

import (
	"context"
	"encoding/binary"
	"sync"
	"testing"
	"time"

	"github.com/couchbase/gocbcore/v10/memd"

	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/internal/clusterconfig"
	"github.com/mayflydb/mayfly/kv"
)

// layout is a two-node Topology whose every vBucketMap row the test sets
// (this node is server 0, n2 server 1).
type layout struct {
	mu  sync.Mutex
	row []int
}

func (l *layout) set(row ...int) {
	l.mu.Lock()
	l.row = row
	l.mu.Unlock()
}

func (l *layout) topology(f **fixture) func(context.Context, string) (*clusterconfig.Topology, error) {
	return func(context.Context, string) (*clusterconfig.Topology, error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		tp := &clusterconfig.Topology{Replicas: 1, Servers: []clusterconfig.Server{
			{Name: "n1", ThisNode: true},
			{Name: "n2", KV: "127.0.0.2:11210", HTTP: "127.0.0.2:8091"},
		}}
		for range (*f).bucket.NumPartitions() {
			tp.Map = append(tp.Map, append([]int(nil), l.row...))
		}
		return tp, nil
	}
}

// TestGetReplica: on a cluster node holding a replica of a key's
// partition (its vBucketMap row lists it after the leader), GET_REPLICA
// answers this node's copy: value, flags and CAS; a missing or expired
// document is not found. The partition's leader and a node holding no
// copy answer NOT_MY_VBUCKET with the configuration, as Couchbase's do; a
// plain GET stays the leader's. Before, every node answered
// UNKNOWN_COMMAND, so an SDK's GetAllReplicas saw the active copy alone
// and GetAnyReplica failed while the leader was down.
func TestGetReplica(t *testing.T) {
	var f *fixture
	l := &layout{}
	l.set(1, 0)
	f = newFixture(t, func(o *kv.Options) { o.Topology = l.topology(&f) })
	c := f.dial(t)
	c.hello(memd.FeatureXerror, memd.FeatureJSON)
	c.login(adminUser, adminPass)
	c.expect(&memd.Packet{Command: memd.CmdSelectBucket, Key: []byte(bucketName)}, memd.StatusSuccess)
	// Written while this node still wrote locally: its copy holds them.
	cas := c.set(memd.CmdSet, "k", `{"v":1}`, 7, 0, 0, memd.StatusSuccess)
	c.set(memd.CmdSet, "short", `{"v":2}`, 0, 10, 0, memd.StatusSuccess)
	f.bucket.SetReplicator(notLeader{})
	f.clock.Advance(11)

	getReplica := func(key string, want memd.StatusCode) *memd.Packet {
		t.Helper()
		return c.expect(&memd.Packet{Command: memd.CmdGetReplica, Key: []byte(key), Vbucket: uint16(f.bucket.PartitionOf(key))}, want)
	}
	r := getReplica("k", memd.StatusSuccess)
	if string(r.Value) != `{"v":1}` || r.Cas != cas || len(r.Extras) != 4 || binary.BigEndian.Uint32(r.Extras) != 7 || r.Datatype != uint8(memd.DatatypeFlagJSON) {
		t.Fatalf("GET_REPLICA: value %q CAS %d (want %d) extras %x datatype %d", r.Value, r.Cas, cas, r.Extras, r.Datatype)
	}
	getReplica("missing", memd.StatusKeyNotFound)
	getReplica("short", memd.StatusKeyNotFound) // expired
	c.expect(&memd.Packet{Command: memd.CmdGet, Key: []byte("k")}, memd.StatusNotMyVBucket)

	l.set(0, 1) // this node leads: the active copy refuses replica reads
	if r := getReplica("k", memd.StatusNotMyVBucket); len(r.Value) == 0 {
		t.Fatal("NOT_MY_VBUCKET without the configuration")
	}
	l.set(1, -1) // no copy here
	getReplica("k", memd.StatusNotMyVBucket)
	c.expect(&memd.Packet{Command: memd.CmdNoop}, memd.StatusSuccess)
}

// TestGetReplicaSingleNode: a single node has no replicas: GET_REPLICA is
// UNKNOWN_COMMAND, as before (an SDK reads the active copy instead).
func TestGetReplicaSingleNode(t *testing.T) {
	f := newFixture(t)
	c := f.dial(t)
	c.login(adminUser, adminPass)
	c.expect(&memd.Packet{Command: memd.CmdSelectBucket, Key: []byte(bucketName)}, memd.StatusSuccess)
	c.set(memd.CmdSet, "k", `{}`, 0, 0, 0, memd.StatusSuccess)
	c.expect(&memd.Packet{Command: memd.CmdGetReplica, Key: []byte("k"), Vbucket: uint16(f.bucket.PartitionOf("k"))}, memd.StatusUnknownCommand)
}

// TestObserveSeqNo: OBSERVE_SEQNO answers (format 0) the partition, this
// copy's UUID (the one a mutation token carries from this node), its
// persisted and its current sequence number; a write's sequence number is
// reached by both once it is on disk. A bad body is EINVAL, a vBucket
// the bucket does not have or a node holding no copy NOT_MY_VBUCKET.
// Before, it was UNKNOWN_COMMAND, which gocb's PersistTo/ReplicateTo
// ignored until its timeout (ambiguous timeout, the write applied).
func TestObserveSeqNo(t *testing.T) {
	var f *fixture
	var users *auth.Store
	l := &layout{}
	l.set(0, 1)
	f = newFixture(t, func(o *kv.Options) { o.Topology, users = l.topology(&f), o.Auth })
	c := f.dial(t)
	c.hello(memd.FeatureXerror, memd.FeatureSeqNo)
	c.login(adminUser, adminPass)
	c.expect(&memd.Packet{Command: memd.CmdSelectBucket, Key: []byte(bucketName)}, memd.StatusSuccess)
	vb := uint16(f.bucket.PartitionOf("k"))
	w := c.expect(&memd.Packet{Command: memd.CmdSet, Key: []byte("k"), Value: []byte(`{}`), Extras: make([]byte, 8), Vbucket: vb}, memd.StatusSuccess)
	if len(w.Extras) != 16 {
		t.Fatalf("no mutation token: extras %x", w.Extras)
	}
	uuid, seq := binary.BigEndian.Uint64(w.Extras), binary.BigEndian.Uint64(w.Extras[8:])
	observe := func(vb uint16, body []byte, want memd.StatusCode) *memd.Packet {
		t.Helper()
		return c.expect(&memd.Packet{Command: memd.CmdObserveSeqNo, Vbucket: vb, Value: body}, want)
	}
	body := binary.BigEndian.AppendUint64(nil, uuid)
	for deadline := time.Now().Add(time.Minute); ; {
		r := observe(vb, body, memd.StatusSuccess)
		v := r.Value
		if len(v) != 27 || v[0] != 0 || binary.BigEndian.Uint16(v[1:]) != vb || binary.BigEndian.Uint64(v[3:]) != uuid {
			t.Fatalf("OBSERVE_SEQNO: %x (vb %d uuid %x)", v, vb, uuid)
		}
		persisted, current := binary.BigEndian.Uint64(v[11:]), binary.BigEndian.Uint64(v[19:])
		if current < seq || persisted > current {
			t.Fatalf("OBSERVE_SEQNO: persisted %d current %d, the write's %d", persisted, current, seq)
		}
		if persisted >= seq {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the write (seq %d) never persisted: %d", seq, persisted)
		}
		time.Sleep(10 * time.Millisecond)
	}
	l.set(1, 0) // a replica answers too
	observe(vb, body, memd.StatusSuccess)
	observe(vb, []byte{1, 2, 3}, memd.StatusInvalidArgs)
	observe(uint16(f.bucket.NumPartitions()), body, memd.StatusNotMyVBucket)
	l.set(1, -1) // no copy here
	observe(vb, body, memd.StatusNotMyVBucket)
	c.expect(&memd.Packet{Command: memd.CmdNoop}, memd.StatusSuccess)

	// A writer observes its writes; a user with no data role on the
	// bucket may not.
	l.set(0, 1)
	if err := users.PutUser("writer", "", "writer-pass", mustParseRoles(t, "data_writer["+bucketName+"]")); err != nil {
		t.Fatal(err)
	}
	if err := users.PutUser("watcher", "", "watcher-pass", mustParseRoles(t, "bucket_admin["+bucketName+"]")); err != nil {
		t.Fatal(err)
	}
	for user, want := range map[string]memd.StatusCode{"writer": memd.StatusSuccess, "watcher": memd.StatusAccessError} {
		wc := f.dial(t)
		wc.login(user, user+"-pass")
		wc.expect(&memd.Packet{Command: memd.CmdSelectBucket, Key: []byte(bucketName)}, memd.StatusSuccess)
		wc.expect(&memd.Packet{Command: memd.CmdObserveSeqNo, Vbucket: vb, Value: body}, want)
	}
}
