package engine

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// A bucket's replicaNumber: set at creation or taken from
// Options.ReplicaNumber (1 unless set), kept in the catalog across a
// restart, kept by an update that leaves it unset; a bucket whose catalog
// entry was written before the setting opens with Options.ReplicaNumber.
// Zero replicas is a number, not "unset", in memory and in JSON.
func TestBucketReplicaNumberSetting(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	open := func(o Options) *Engine {
		t.Helper()
		o.NumPartitions, o.NoSync = 4, true
		e, err := Open(dir, &o)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	replicas := func(e *Engine, name string) ReplicaCount {
		t.Helper()
		b, err := e.Bucket(name)
		if err != nil {
			t.Fatal(err)
		}
		return b.Settings().ReplicaNumber
	}

	e := open(Options{})
	for name, r := range map[string]ReplicaCount{"zero": Replicas(0), "three": Replicas(3), "plain": {}, "old": {}} {
		if _, err := e.CreateBucket(ctx, BucketSettings{Name: name, ReplicaNumber: r}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.CreateBucket(ctx, BucketSettings{Name: "four", ReplicaNumber: Replicas(4)}); !errors.Is(err, ErrInvalidSetting) {
		t.Errorf("replicaNumber 4: %v, want ErrInvalidSetting", err)
	}
	want := map[string]ReplicaCount{"zero": Replicas(0), "three": Replicas(3), "plain": Replicas(1), "old": Replicas(1)}
	for name, r := range want {
		if got := replicas(e, name); got != r {
			t.Errorf("bucket %s: replicaNumber %v, want %v", name, got, r)
		}
	}
	b, _ := e.Bucket("three")
	if _, s, err := b.UpdateSettings(ctx, func(s *BucketSettings) error {
		s.ReplicaNumber, s.MaxTTL = ReplicaCount{}, 30
		return nil
	}); err != nil || s.ReplicaNumber != Replicas(3) {
		t.Errorf("an update without replicaNumber: %v %v, want 3 kept", s.ReplicaNumber, err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	// Bucket "old" as a version before the setting stored it: no
	// replicaNumber in its catalog entry.
	db, err := bolt.Open(filepath.Join(dir, catalogFile), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket(bktBuckets)
		var ce map[string]any
		if err := json.Unmarshal(bk.Get([]byte("old")), &ce); err != nil {
			return err
		}
		settings, _ := ce["settings"].(map[string]any)
		if _, ok := settings["replicaNumber"]; !ok {
			return errors.New("the catalog entry has no replicaNumber")
		}
		delete(settings, "replicaNumber")
		v, err := json.Marshal(ce)
		if err != nil {
			return err
		}
		return bk.Put([]byte("old"), v)
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}

	// Started again as a cluster node would be (a default of 2): the
	// buckets keep theirs, the old one takes the default.
	e = open(Options{ReplicaNumber: Replicas(2)})
	defer e.Close()
	want["old"] = Replicas(2)
	for name, r := range want {
		if got := replicas(e, name); got != r {
			t.Errorf("after a restart, bucket %s: replicaNumber %v, want %v", name, got, r)
		}
	}

	// JSON: a number, 0 included; none set is left out (omitzero) and
	// reads back as none.
	for _, tc := range []struct {
		r    ReplicaCount
		json string
	}{{Replicas(0), `{"replicaNumber":0}`}, {Replicas(2), `{"replicaNumber":2}`}, {ReplicaCount{}, `{}`}} {
		v := struct {
			ReplicaNumber ReplicaCount `json:"replicaNumber,omitzero"`
		}{tc.r}
		out, err := json.Marshal(v)
		if err != nil || string(out) != tc.json {
			t.Errorf("%v: %s %v, want %s", tc.r, out, err, tc.json)
		}
		v.ReplicaNumber = Replicas(7)
		if err := json.Unmarshal(out, &v); err != nil || (v.ReplicaNumber != tc.r && tc.json != `{}`) {
			t.Errorf("%s reads as %v %v, want %v", out, v.ReplicaNumber, err, tc.r)
		}
	}
	var v struct {
		ReplicaNumber ReplicaCount `json:"replicaNumber"`
	}
	if err := json.Unmarshal([]byte(`{"replicaNumber":null}`), &v); err != nil || v.ReplicaNumber != (ReplicaCount{}) {
		t.Errorf("null reads as %v %v, want none", v.ReplicaNumber, err)
	}
	if err := json.Unmarshal([]byte(`{"replicaNumber":"one"}`), &v); err == nil {
		t.Error(`"one" read as a replicaNumber`)
	}
}
