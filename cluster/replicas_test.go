package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// A bucket's replicaNumber is its settings': DefineBucket writes it at the
// definition's top level, where a version before the settings had it wrote
// its own, so a definition that version wrote reads the same (and one this
// version writes reads the same to it); the orchestrator places that many
// copies plus one, and the status shows it. A definition without one gets
// DefaultReplicaNumber; one outside 0..3 is refused.
func TestBucketDefReplicaNumber(t *testing.T) {
	ctx, cli := oneNode(t)

	// As the version before wrote it: the settings, and replicaNumber
	// beside them.
	old := `{"name":"old","bucketType":"couchbase","maxTTL":0,"ramQuotaMB":100,"purgeInterval":3,"exp_pager_stime":3600,` +
		`"exp_pager_initial_run_time":-1,"uuid":"u-old","numVBuckets":16,"replicaNumber":0}`
	if _, err := cli.Put(ctx, bucketsPrefix+"old", old); err != nil {
		t.Fatal(err)
	}
	def, _, err := ReadBucket(ctx, cli, "old")
	if n, ok := def.ReplicaNumber.Get(); err != nil || !ok || n != 0 || def.Replicas() != 0 || def.NumVBuckets != 16 {
		t.Fatalf("a definition written before: %+v %v, want replicaNumber 0", def, err)
	}

	if err := DefineBucket(ctx, cli, BucketDef{BucketSettings: engine.BucketSettings{Name: "one", UUID: "u-one", NumVBuckets: 16, ReplicaNumber: engine.Replicas(1)}}); err != nil {
		t.Fatal(err)
	}
	if err := DefineBucket(ctx, cli, BucketDef{BucketSettings: engine.BucketSettings{Name: "plain", UUID: "u-plain", NumVBuckets: 16}}); err != nil {
		t.Fatal(err)
	}
	if err := DefineBucket(ctx, cli, BucketDef{BucketSettings: engine.BucketSettings{Name: "four", UUID: "u-four", ReplicaNumber: engine.Replicas(4)}}); !errors.Is(err, engine.ErrInvalidSetting) {
		t.Errorf("replicaNumber 4: %v, want ErrInvalidSetting", err)
	}
	for name, want := range map[string]float64{"one": 1, "plain": DefaultReplicaNumber} {
		resp, err := cli.Get(ctx, bucketsPrefix+name)
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("reading %s: %v", name, err)
		}
		var top map[string]any
		if err := json.Unmarshal(resp.Kvs[0].Value, &top); err != nil || top["replicaNumber"] != want {
			t.Errorf("definition of %s as written: %s, want replicaNumber %v at its top level", name, resp.Kvs[0].Value, want)
		}
	}

	// Placed with replicaNumber + 1 copies (a single node holds one of
	// each: the partitions of those wanting more are degraded).
	for name, copies := range map[string]int{"old": 1, "one": 2, "plain": DefaultReplicaNumber + 1} {
		eventually(t, "the map of "+name, func() (bool, string) {
			m, _, err := ReadMap(ctx, cli, name)
			if err != nil || m == nil {
				return false, fmt.Sprint(m, err)
			}
			if m.Copies != copies {
				t.Errorf("bucket %s placed with %d copies, want %d", name, m.Copies, copies)
			}
			return true, ""
		})
	}
	st, err := ReadStatus(ctx, cli, []string{"n1"})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int{"old": 0, "one": 1, "plain": DefaultReplicaNumber} {
		if bs, ok := st.Bucket(name); !ok || bs.ReplicaNumber != want {
			t.Errorf("status of %s: %+v, want replicaNumber %d", name, bs, want)
		}
	}
}
