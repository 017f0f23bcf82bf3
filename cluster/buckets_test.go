package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/mayflydb/mayfly/engine"
)

// A bucket's life in the cluster's state: defined with a UUID, placed with
// it, its settings changed only for that incarnation, deleted with its
// map, its definitions of every kind (its flush record included) and a
// tombstone (not when another incarnation is named), and defined again as
// a new incarnation with a new map, whose flushes the deleted one's
// passes cannot record into; a watcher sees every step in order, and the
// orchestrator removes a map no definition owns.
func TestBucketIncarnationsInClusterState(t *testing.T) {
	ctx, cli := oneNode(t)

	placed := func(uuid string) {
		t.Helper()
		eventually(t, "the map of b placed for "+uuid, func() (bool, string) {
			m, _, err := ReadMap(ctx, cli, "b")
			if err != nil || m == nil {
				return false, fmt.Sprint(m, err)
			}
			return m.UUID == uuid && len(m.Partitions) == NumPartitions, m.UUID
		})
	}
	def := func(uuid string) BucketDef {
		return BucketDef{BucketSettings: engine.BucketSettings{Name: "b", Type: engine.Couchbase, UUID: uuid, ReplicaNumber: engine.Replicas(0)}}
	}
	if err := DefineBucket(ctx, cli, def("u1")); err != nil {
		t.Fatal(err)
	}
	if err := DefineBucket(ctx, cli, def("u9")); !errors.Is(err, ErrBucketExists) {
		t.Fatalf("defining a defined name again: %v, want ErrBucketExists", err)
	}
	placed("u1")

	// The watcher starts with the definitions there are, and says that a
	// bucket the caller has is not defined.
	var mu sync.Mutex
	var events []string
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		WatchBuckets(wctx, cli, func() []string { return []string{"b", "had"} }, func(ev BucketEvent) error {
			mu.Lock()
			defer mu.Unlock()
			if ev.Def == nil {
				events = append(events, "delete "+ev.Name)
				return nil
			}
			events = append(events, fmt.Sprintf("put %s %s maxTTL=%d", ev.Name, ev.Def.UUID, ev.Def.MaxTTL))
			return nil
		})
	}()
	defer func() { stop(); <-done }()
	eventually(t, "the watcher reads the definitions first", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(events) == 2, fmt.Sprint(events)
	})

	if ok, err := DeleteBucket(ctx, cli, "b", "u2"); ok || err != nil {
		t.Fatalf("deleting another incarnation: %v %v, want false, nil", ok, err)
	}
	if _, _, err := ReadBucket(ctx, cli, "b"); err != nil {
		t.Fatalf("deleting another incarnation removed the definition: %v", err)
	}
	// Its definitions in etcd go with it, of every kind a bucket has (its
	// flush record too: a flush asked and a partition's cut recorded);
	// another bucket's stay ("b2" shares b's prefix but not its "b/").
	var keys []string
	for k := DesignDocs; k <= Flushes; k++ {
		if k == Users {
			continue // the cluster's, no bucket's
		}
		for _, bucket := range []string{"b", "b2"} {
			if k == Flushes {
				st, _, err := AskFlush(ctx, cli, bucket, "u1", 4, 1_700_000_000)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := UpdateFlush(ctx, cli, bucket, st.UUID, st.Rev, func(s *FlushState) { s.Cuts = map[int]uint64{2: 17} }); err != nil {
					t.Fatal(err)
				}
			} else if _, err := cli.Put(ctx, defKey(k, bucket, "x"), "{}"); err != nil {
				t.Fatal(err)
			}
			keys = append(keys, k.prefix()+bucket+"/")
		}
	}
	if ok, err := DeleteBucket(ctx, cli, "b", "u1"); !ok || err != nil {
		t.Fatalf("DeleteBucket: %v %v", ok, err)
	}
	if m, _, err := ReadMap(ctx, cli, "b"); m != nil || err != nil {
		t.Fatalf("the deleted bucket's map stays: %v %v", m, err)
	}
	for _, prefix := range keys {
		resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		switch mine := !strings.Contains(prefix, "b2"); {
		case mine && resp.Count != 0:
			t.Errorf("%s: %d keys left after bucket b was deleted", prefix, resp.Count)
		case !mine && resp.Count == 0:
			t.Errorf("%s: deleted with bucket b", prefix)
		}
	}
	bs, err := ReadBuckets(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := bs.Defs["b"]; ok || !bs.IsDeleted("b", "u1") || bs.IsDeleted("b", "u2") {
		t.Fatalf("after the deletion: defs %v, deleted %v", bs.Defs, bs.Deleted)
	}
	if _, _, err := ReadBucket(ctx, cli, "b"); !errors.Is(err, ErrBucketNotDefined) {
		t.Fatalf("ReadBucket of a deleted bucket: %v", err)
	}

	// The deleted incarnation cannot be defined again (a node that
	// applies its definition late, after the deletion, must not bring it
	// back for every node).
	if err := DefineBucket(ctx, cli, def("u1")); !errors.Is(err, ErrBucketDeleted) {
		t.Fatalf("defining a deleted incarnation again: %v, want ErrBucketDeleted", err)
	}
	if _, _, err := ReadBucket(ctx, cli, "b"); !errors.Is(err, ErrBucketNotDefined) {
		t.Fatalf("a deleted incarnation defined again: %v", err)
	}
	if err := DefineBucket(ctx, cli, def("u2")); err != nil {
		t.Fatal(err)
	}
	placed("u2")
	// The new incarnation counts its flushes from 1 again: a pass of the
	// deleted one's flush 1 (a node that has not closed it yet) cannot
	// write into the new one's record.
	if st, _, err := AskFlush(ctx, cli, "b", "u2", 4, 1_700_000_001); err != nil || st.Rev != 1 {
		t.Fatalf("the new incarnation's first flush: %+v %v, want rev 1", st, err)
	}
	if _, err := UpdateFlush(ctx, cli, "b", "u1", 1, func(s *FlushState) { s.Done = []int{0, 1, 2, 3} }); !errors.Is(err, engine.ErrFlushSuperseded) {
		t.Fatalf("the deleted incarnation's flush recording into the new one's: %v, want ErrFlushSuperseded", err)
	}
	if _, err := UpdateFlush(ctx, cli, "b", "u2", 1, func(s *FlushState) { s.Done = []int{0} }); err != nil {
		t.Fatalf("the new incarnation's flush recording a partition: %v", err)
	}
	old := def("u1")
	old.MaxTTL = 30
	if err := UpdateBucket(ctx, cli, old); !errors.Is(err, ErrBucketNotDefined) {
		t.Fatalf("updating the deleted incarnation: %v, want ErrBucketNotDefined", err)
	}
	upd := def("u2")
	upd.MaxTTL = 60
	upd.ReplicaNumber = engine.ReplicaCount{} // none: the definition's stays
	if err := UpdateBucket(ctx, cli, upd); err != nil {
		t.Fatal(err)
	}
	got, _, err := ReadBucket(ctx, cli, "b")
	if n, ok := got.ReplicaNumber.Get(); err != nil || got.MaxTTL != 60 || !ok || n != 0 {
		t.Fatalf("after the update: %+v %v", got, err)
	}
	// Another replicaNumber is the definition's, and the orchestrator's
	// map wants as many copies (this one node holds the one it can).
	upd.ReplicaNumber = engine.Replicas(1)
	if err := UpdateBucket(ctx, cli, upd); err != nil {
		t.Fatalf("changing replicaNumber: %v", err)
	}
	if got, _, err := ReadBucket(ctx, cli, "b"); err != nil || got.Replicas() != 1 || got.MaxTTL != 60 {
		t.Fatalf("after changing replicaNumber: %+v %v", got, err)
	}
	eventually(t, "the map wants two copies", func() (bool, string) {
		m, _, err := ReadMap(ctx, cli, "b")
		return err == nil && m != nil && m.Copies == 2, fmt.Sprint(m != nil && m.Copies == 2, err)
	})
	// Out of 0..3: refused, nothing written.
	upd.ReplicaNumber = engine.Replicas(engine.MaxReplicas + 1)
	upd.MaxTTL = 90
	if err := UpdateBucket(ctx, cli, upd); !errors.Is(err, engine.ErrInvalidSetting) || !strings.Contains(err.Error(), "replicaNumber") {
		t.Fatalf("replicaNumber %d: %v, want ErrInvalidSetting naming replicaNumber", engine.MaxReplicas+1, err)
	}
	if got, _, err := ReadBucket(ctx, cli, "b"); err != nil || got.Replicas() != 1 || got.MaxTTL != 60 {
		t.Fatalf("after a refused update: %+v %v", got, err)
	}
	// Lowered: written, and the map wants one copy again.
	upd.ReplicaNumber = engine.Replicas(0)
	if err := UpdateBucket(ctx, cli, upd); err != nil {
		t.Fatalf("lowering replicaNumber: %v", err)
	}
	if got, _, err := ReadBucket(ctx, cli, "b"); err != nil || got.Replicas() != 0 || got.MaxTTL != 90 {
		t.Fatalf("after lowering replicaNumber: %+v %v", got, err)
	}
	eventually(t, "the map wants one copy", func() (bool, string) {
		m, _, err := ReadMap(ctx, cli, "b")
		return err == nil && m != nil && m.Copies == 1, fmt.Sprint(m != nil && m.Copies == 1, err)
	})

	// A map placed from a read made before a deletion: the orchestrator
	// removes it.
	ghost, _ := json.Marshal(PartitionMap{Bucket: "ghost", UUID: "g1", Copies: 1, Partitions: Place([]string{"n1"}, NumPartitions, 1)})
	if _, err := cli.Put(ctx, mapsPrefix+"ghost", string(ghost)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the orchestrator removes a map without a definition", func() (bool, string) {
		m, _, err := ReadMap(ctx, cli, "ghost")
		return m == nil && err == nil, fmt.Sprint(m, err)
	})

	want := []string{"delete had", "put b u1 maxTTL=0", "delete b", "put b u2 maxTTL=0", "put b u2 maxTTL=60", "put b u2 maxTTL=60", "put b u2 maxTTL=90"}
	eventually(t, "the watcher sees every change", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return fmt.Sprint(events) == fmt.Sprint(want), fmt.Sprint(events)
	})
}
