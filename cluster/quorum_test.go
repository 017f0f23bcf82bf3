package cluster

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestWritesWithoutQuorumFailClearly: each kind of change of the cluster's
// state a client waits for (a design document put or deleted, a search
// definition put or deleted, a bucket's collections changed, a bucket
// defined, its settings changed, deleted), asked of a member whose etcd
// lost its quorum, fails within WriteTimeout, rather than hanging for as
// long as the caller waits (etcd's client tries again for minutes; before,
// only the users' writes were bounded), with ErrUnavailable, which is an
// engine.ErrTempFail (a 503 the client may retry); and it wrote nothing:
// the keys this member holds are as they were.
func TestWritesWithoutQuorumFailClearly(t *testing.T) {
	t.Parallel() // it mostly waits out the writes' timeouts without a quorum
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	nodes, _, _ := startCluster(t, ctx, 3)
	defer closeAll(nodes)
	cli := nodes[2].Client()
	def := BucketDef{BucketSettings: engine.BucketSettings{Name: "b", Type: engine.Couchbase, UUID: "u1"}}
	if err := DefineBucket(ctx, cli, def); err != nil {
		t.Fatal(err)
	}
	if _, _, err := PutDesignDoc(ctx, cli, "b", "kept", []byte(`{"views":{}}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := PutSearchDef(ctx, cli, "b", "kept", []byte(`{"type":"fulltext-index"}`)); err != nil {
		t.Fatal(err)
	}
	// What this member holds, read locally (serializable) once the
	// quorum is gone: each write must leave it so.
	snapshot := func() (map[string]string, error) {
		resp, err := cli.Get(ctx, "/mayfly/", clientv3.WithPrefix(), clientv3.WithSerializable())
		if err != nil {
			return nil, err
		}
		kv := map[string]string{}
		for _, e := range resp.Kvs {
			kv[string(e.Key)] = string(e.Value)
		}
		return kv, nil
	}
	for _, n := range nodes[:2] {
		if err := n.stop(false); err != nil {
			t.Log(err)
		}
	}
	nodes[0], nodes[1] = nil, nil
	before, err := snapshot()
	if err != nil {
		t.Fatal(err)
	}

	seed := func() engine.Manifest { return engine.Manifest{UID: 0} }
	settings := def
	settings.MaxTTL = 60
	writes := []struct {
		kind  string
		write func(ctx context.Context) error
	}{
		{"design document put", func(ctx context.Context) error {
			_, _, err := PutDesignDoc(ctx, cli, "b", "new", []byte(`{"views":{}}`))
			return err
		}},
		{"design document deleted", func(ctx context.Context) error {
			_, err := DeleteDesignDoc(ctx, cli, "b", "kept")
			return err
		}},
		{"search definition put", func(ctx context.Context) error {
			_, err := PutSearchDef(ctx, cli, "b", "new", []byte(`{"type":"fulltext-index"}`))
			return err
		}},
		{"search definition deleted", func(ctx context.Context) error {
			_, err := DeleteSearchDef(ctx, cli, "b", "kept")
			return err
		}},
		{"collections changed", func(ctx context.Context) error {
			_, _, err := UpdateManifest(ctx, cli, "b", seed, func(m *engine.Manifest) error { m.UID++; return nil })
			return err
		}},
		{"bucket defined", func(ctx context.Context) error {
			return DefineBucket(ctx, cli, BucketDef{BucketSettings: engine.BucketSettings{Name: "c", Type: engine.Couchbase, UUID: "u2"}})
		}},
		{"bucket settings changed", func(ctx context.Context) error { return UpdateBucket(ctx, cli, settings) }},
		{"bucket deleted", func(ctx context.Context) error {
			_, err := DeleteBucket(ctx, cli, "b", "u1")
			return err
		}},
	}
	// The writes run at once (each waits out WriteTimeout); each kind's
	// answer is a subtest of its own.
	results := make([]chan error, len(writes))
	start := time.Now() // wall clock: reported only
	for i, w := range writes {
		results[i] = make(chan error, 1)
		go func() { results[i] <- w.write(ctx) }()
	}
	guard, stop := context.WithTimeout(ctx, 2*time.Minute) // a hang guard, not a speed
	defer stop()
	for i, w := range writes {
		t.Run(w.kind, func(t *testing.T) {
			select {
			case err := <-results[i]:
				t.Logf("after %v: %v", time.Since(start).Round(time.Millisecond), err)
				if !errors.Is(err, ErrUnavailable) || !errors.Is(err, engine.ErrTempFail) {
					t.Errorf("%s without a quorum: %v; want ErrUnavailable, an engine.ErrTempFail", w.kind, err)
				}
			case <-guard.Done():
				t.Errorf("%s without a quorum never returned", w.kind)
			}
		})
	}
	if guard.Err() != nil {
		t.FailNow() // the writes still wait: this member's keys say nothing yet
	}
	after, err := snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("a write that failed changed this member's keys:\nbefore %v\nafter  %v", before, after)
	}
}

// TestUnavailableMapsOnlyEtcdFailures: the one mapping of a failed change
// of the cluster's state marks etcd's failures and the bound's deadline
// temporary (ErrUnavailable, engine.ErrTempFail), and leaves a refused
// change (the caller's error to fix) and a caller that left as they are.
func TestUnavailableMapsOnlyEtcdFailures(t *testing.T) {
	ctx := context.Background()
	left, leave := context.WithCancel(ctx)
	leave()
	for _, c := range []struct {
		ctx  context.Context
		err  error
		temp bool
	}{
		{ctx, nil, false},
		{ctx, fmt.Errorf("cluster: writing: %w", context.DeadlineExceeded), true},
		{ctx, fmt.Errorf("cluster: writing: %w", rpctypes.ErrTimeout), true},
		{ctx, fmt.Errorf("cluster: writing: %w", rpctypes.ErrGRPCNoLeader), true},
		{ctx, fmt.Errorf("%w: design document", ErrDefNotFound), false},
		{ctx, fmt.Errorf("%w: %q", ErrBucketExists, "b"), false},
		{ctx, engine.ErrScopeExists, false},
		{left, context.Canceled, false},
	} {
		got := Unavailable(c.ctx, c.err)
		if temp := errors.Is(got, ErrUnavailable) && errors.Is(got, engine.ErrTempFail); temp != c.temp {
			t.Errorf("Unavailable(%v) = %v; temporary %v, want %v", c.err, got, temp, c.temp)
		}
		if !c.temp && got != c.err {
			t.Errorf("Unavailable(%v) = %v; want it unchanged", c.err, got)
		}
		if c.temp && !errors.Is(got, c.err) {
			t.Errorf("Unavailable(%v) = %v; want it to wrap the cause", c.err, got)
		}
	}
}
