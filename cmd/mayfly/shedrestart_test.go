package main

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/cluster"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/replica"
)

// TestRestartedShedCopyRunsItsStoredGroup: a node restarted while a
// lowering sheds its copy of a partition runs that partition's group
// again from its Raft store, whether or not the partition holds
// documents, until the conf change removing it applies there: the copies
// the map keeps may need its vote for that change (three copies lowered
// to one, the third cut off from the leader). Before, it did so only for
// a partition holding documents: one never written to stayed out of its
// group after the restart, and such a partition could be left without a
// majority for the change, and so without a leader. A shed copy whose
// group the store does not hold (it left before the restart) is not
// started.
func TestRestartedShedCopyRunsItsStoredGroup(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	open := func() *replica.Host {
		h, err := replica.Open(replica.Options{Dir: filepath.Join(dir, "raft"), Node: "n1", Listen: "127.0.0.1:0", Resolver: noPeers{}, Peers: []string{"n1", "n2", "n3"}})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	eng, err := engine.Open(filepath.Join(dir, "data"), &engine.Options{NumPartitions: 4, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	b, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "b", Type: engine.Couchbase})
	if err != nil {
		t.Fatal(err)
	}
	uuid := b.Settings().UUID
	never := func() bool { return false }

	// Before the restart: n1 a voter of partition 1's group with n2 and
	// n3, nothing written to it.
	h := open()
	id := replica.BucketGroup("b", uuid, 1)
	if err := h.AddGroup(id, []string{"n1", "n2", "n3"}, replica.NewBucketMachine(b, 1, never)); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if b.ReplicatedDurable(1) != 0 {
		t.Fatalf("partition 1 holds %d", b.ReplicatedDurable(1))
	}

	// After it: the map sheds n1 from partitions 1 and 2 (its store holds
	// no group of 2).
	h = open()
	rctx, rcancel := context.WithCancel(ctx)
	r := &replication{h: h, retry: time.Hour, logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		ctx: rctx, cancel: rcancel, deleted: map[string]bool{}, following: map[*engine.Bucket]*following{}, listed: map[replica.GroupID]uint64{}}
	defer r.Close()
	m := &cluster.PartitionMap{Bucket: "b", UUID: uuid, Copies: 1}
	for p := range 4 {
		part := cluster.Partition{Voters: []string{"n2"}, Leader: "n2", Epoch: 3}
		if p == 1 || p == 2 {
			part.Shed = []string{"n1", "n3"}
		}
		m.Partitions = append(m.Partitions, part)
	}
	if !r.applyMap(ctx, b, m, true) {
		t.Fatal("applyMap failed")
	}
	if !h.Holds(id) {
		t.Fatal("n1 does not run its shed copy's stored group after a restart: its vote is lost to the change removing it")
	}
	if vs, err := h.Voters(id); err != nil || len(vs) != 3 {
		t.Fatalf("the group's configuration: %v, %v; want its stored n1,n2,n3", vs, err)
	}
	other := replica.BucketGroup("b", uuid, 2)
	if stored, err := h.Stored(other); h.Holds(other) || stored || err != nil {
		t.Fatalf("a shed copy without a stored group: running %v, stored %v (%v)", h.Holds(other), stored, err)
	}
}
