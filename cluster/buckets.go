package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/mayflydb/mayfly/engine"
)

// deletedPrefix holds a tombstone per deleted bucket incarnation,
// /mayfly/deleted/NAME/UUID: a node that was down while the bucket was
// deleted drops its copy at start rather than define it again.
const deletedPrefix = "/mayfly/deleted/"

// Buckets is one consistent read of the bucket definitions and the
// tombstones of deleted incarnations.
type Buckets struct {
	// Rev is the etcd revision read at.
	Rev int64
	// Defs are the bucket definitions, by name.
	Defs map[string]BucketDef
	// Deleted holds, by name, the UUIDs of the bucket's deleted
	// incarnations.
	Deleted map[string]map[string]bool
}

// watchRetry is how long WatchBuckets waits before it reads every
// definition again after fn failed one.
const watchRetry = 2 * time.Second

// IsDeleted reports whether the cluster deleted bucket name's incarnation
// uuid.
func (bs *Buckets) IsDeleted(name, uuid string) bool { return bs.Deleted[name][uuid] }

// ReadBuckets reads the bucket definitions and tombstones at one revision.
func ReadBuckets(ctx context.Context, cli *clientv3.Client) (*Buckets, error) {
	resp, err := cli.Txn(ctx).Then(
		clientv3.OpGet(bucketsPrefix, clientv3.WithPrefix()),
		clientv3.OpGet(deletedPrefix, clientv3.WithPrefix(), clientv3.WithKeysOnly()),
	).Commit()
	if err != nil {
		return nil, fmt.Errorf("cluster: reading the bucket definitions: %w", err)
	}
	bs := &Buckets{Rev: resp.Header.Revision, Defs: map[string]BucketDef{}, Deleted: map[string]map[string]bool{}}
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		var d BucketDef
		if err := json.Unmarshal(kv.Value, &d); err != nil {
			return nil, fmt.Errorf("cluster: %s: %w", kv.Key, err)
		}
		bs.Defs[strings.TrimPrefix(string(kv.Key), bucketsPrefix)] = d
	}
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		name, uuid, ok := strings.Cut(strings.TrimPrefix(string(kv.Key), deletedPrefix), "/")
		if !ok {
			continue
		}
		if bs.Deleted[name] == nil {
			bs.Deleted[name] = map[string]bool{}
		}
		bs.Deleted[name][uuid] = true
	}
	return bs, nil
}

// ReadBucket reads bucket name's definition and the revision it was last
// written at; ErrBucketNotDefined when there is none.
func ReadBucket(ctx context.Context, cli *clientv3.Client, name string) (BucketDef, int64, error) {
	resp, err := cli.Get(ctx, bucketsPrefix+name)
	if err != nil {
		return BucketDef{}, 0, fmt.Errorf("cluster: reading bucket %q: %w", name, err)
	}
	if len(resp.Kvs) == 0 {
		return BucketDef{}, 0, fmt.Errorf("%w: %q", ErrBucketNotDefined, name)
	}
	var d BucketDef
	if err := json.Unmarshal(resp.Kvs[0].Value, &d); err != nil {
		return BucketDef{}, 0, fmt.Errorf("cluster: bucket %q: %w", name, err)
	}
	return d, resp.Kvs[0].ModRevision, nil
}

// UpdateBucket replaces the settings of the bucket's definition of the
// same name and UUID with def's, in a transaction conditioned on the
// definition not having changed since it was read (retried when it had).
// A def without a replicaNumber keeps the definition's; another one (0..
// engine.MaxReplicas, else engine.ErrInvalidSetting, changing nothing) is
// the definition's, and the orchestrator adds the partitions' copies
// (AddCopies) or takes the surplus away (RemoveCopies), a step at a time.
// ErrBucketNotDefined when the cluster defines no such incarnation
// (deleted, or created again); nothing is written when the settings are
// already def's. ErrUnavailable when etcd did not take it within
// WriteTimeout (Unavailable).
func UpdateBucket(ctx context.Context, cli *clientv3.Client, def BucketDef) error {
	return bounded(ctx, func(ctx context.Context) error { return updateBucket(ctx, cli, def) })
}

// updateBucket is UpdateBucket, unbounded.
func updateBucket(ctx context.Context, cli *clientv3.Client, def BucketDef) error {
	for {
		cur, rev, err := ReadBucket(ctx, cli, def.Name)
		if err != nil {
			return err
		}
		if cur.UUID != def.UUID {
			return fmt.Errorf("%w: %q with UUID %s (the cluster's has %s)", ErrBucketNotDefined, def.Name, def.UUID, cur.UUID)
		}
		if n, ok := def.ReplicaNumber.Get(); !ok {
			def.ReplicaNumber = cur.ReplicaNumber
		} else if n < 0 || n > engine.MaxReplicas {
			return fmt.Errorf("%w: replicaNumber: bucket %q: %d is not 0..%d", engine.ErrInvalidSetting, def.Name, n, engine.MaxReplicas)
		}
		if cur.BucketSettings == def.BucketSettings {
			return nil
		}
		cur.BucketSettings = def.BucketSettings
		data, err := json.Marshal(cur)
		if err != nil {
			return err
		}
		key := bucketsPrefix + def.Name
		resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
			Then(clientv3.OpPut(key, string(data))).Commit()
		if err != nil {
			return fmt.Errorf("cluster: updating bucket %q: %w", def.Name, err)
		}
		if resp.Succeeded {
			return nil
		}
	}
}

// DeleteBucket removes the definition of bucket name's incarnation uuid,
// its partition map, its design documents, search definitions,
// collections manifest and flush record, takes its roles from the
// cluster's users (as auth.Store.DropBucketRoles does a node's), and
// leaves a tombstone /mayfly/deleted/NAME/UUID, in one transaction
// conditioned on the definition being the one read and the users
// unchanged since read. It reports false, and writes nothing, when the
// cluster does not define that incarnation (deleted already, or another
// one defined since); ErrUnavailable as UpdateBucket's.
func DeleteBucket(ctx context.Context, cli *clientv3.Client, name, uuid string) (deleted bool, err error) {
	err = bounded(ctx, func(ctx context.Context) error {
		var err error
		deleted, err = deleteBucket(ctx, cli, name, uuid)
		return err
	})
	return deleted, err
}

// deleteBucket is DeleteBucket, unbounded.
func deleteBucket(ctx context.Context, cli *clientv3.Client, name, uuid string) (bool, error) {
	for {
		cur, rev, err := ReadBucket(ctx, cli, name)
		if err != nil || cur.UUID != uuid {
			if err != nil && !errors.Is(err, ErrBucketNotDefined) {
				return false, err
			}
			return false, nil
		}
		key := bucketsPrefix + name
		// The bucket's roles leave the cluster's users in the same
		// transaction (users.go), conditioned on no user changing
		// meanwhile.
		usersSame, dropRoles, err := dropBucketRoles(ctx, cli, name)
		if err != nil {
			return false, err
		}
		stamp, _ := json.Marshal(map[string]any{"deleted": time.Now().UTC()}) // wall clock: when, for an operator reading etcd
		ops := []clientv3.Op{
			clientv3.OpDelete(key),
			clientv3.OpDelete(mapsPrefix + name),
			clientv3.OpPut(deletedPrefix+name+"/"+uuid, string(stamp)),
		}
		// Its definitions (defs.go: design documents, search definitions,
		// collections manifest, flush record) go with it, as a single
		// node's do: a bucket created again under its name starts
		// without them.
		ops = append(ops, bucketDefDeletes(name)...)
		resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev), usersSame).
			Then(append(ops, dropRoles...)...).Commit()
		if err != nil {
			return false, fmt.Errorf("cluster: deleting bucket %q: %w", name, err)
		}
		if resp.Succeeded {
			return true, nil
		}
	}
}

// BucketEvent is a change of one bucket's definition: Def is the
// definition now, nil when the bucket is no longer defined.
type BucketEvent struct {
	Name string
	Def  *BucketDef
}

// WatchBuckets reads the bucket definitions, calls fn for each one and,
// with a nil Def, for each name have lists (the caller's buckets; have may
// be nil) that is not defined, then calls fn for each change under
// /mayfly/buckets/ until ctx ends, in order. When the watch breaks it
// starts again from the revision it reached; when etcd compacted that
// history away it reads every definition again, as at first (names it
// told of before count as had). fn runs on the watching goroutine, one
// call at a time. An event fn fails (it returns an error: a bucket it could
// not create, a tombstone it could not read) is not lost: after
// watchRetry, every definition is read again and given to fn again, as
// at first, so fn must take an event it applied before as done.
func WatchBuckets(ctx context.Context, cli *clientv3.Client, have func() []string, fn func(BucketEvent) error) {
	var rev int64
	known := map[string]bool{}
	failed := false
	call := func(ev BucketEvent) {
		if fn(ev) != nil {
			failed = true
			if ev.Def == nil {
				known[ev.Name] = true // so that the read again tells it again
			}
		}
	}
	for ctx.Err() == nil {
		if failed {
			failed, rev = false, 0 // read everything again, after a pause
			select {
			case <-ctx.Done():
				return
			case <-time.After(watchRetry):
			}
		}
		if rev == 0 && have != nil {
			for _, name := range have() {
				known[name] = true
			}
		}
		if rev == 0 {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			bs, err := ReadBuckets(rctx, cli)
			cancel()
			if err != nil {
				select {
				case <-ctx.Done():
				case <-time.After(time.Second): // no quorum: try again
				}
				continue
			}
			for name := range known {
				if _, ok := bs.Defs[name]; !ok {
					delete(known, name)
					call(BucketEvent{Name: name})
				}
			}
			for name, d := range bs.Defs {
				known[name] = true
				call(BucketEvent{Name: name, Def: &d})
			}
			rev = bs.Rev
			if failed {
				continue
			}
		}
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		for resp := range cli.Watch(wctx, bucketsPrefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
			if resp.CompactRevision > 0 {
				rev = 0 // history gone: read everything again
				break
			}
			for _, ev := range resp.Events {
				name := strings.TrimPrefix(string(ev.Kv.Key), bucketsPrefix)
				if ev.Type == clientv3.EventTypeDelete {
					delete(known, name)
					call(BucketEvent{Name: name})
					continue
				}
				var d BucketDef
				if err := json.Unmarshal(ev.Kv.Value, &d); err != nil {
					continue // not a definition this version reads
				}
				known[name] = true
				call(BucketEvent{Name: name, Def: &d})
			}
			if r := watchedUpTo(resp); r > rev {
				rev = r
			}
			if failed {
				break
			}
		}
		cancel()
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond): // the watch broke: a moment before another
		}
	}
}

// IsDeleted reports whether the cluster deleted bucket name's incarnation
// uuid (its tombstone is there).
func IsDeleted(ctx context.Context, cli *clientv3.Client, name, uuid string) (bool, error) {
	resp, err := cli.Get(ctx, deletedPrefix+name+"/"+uuid, clientv3.WithKeysOnly())
	if err != nil {
		return false, fmt.Errorf("cluster: reading bucket %q's tombstones: %w", name, err)
	}
	return len(resp.Kvs) > 0, nil
}
