package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/mayflydb/mayfly/engine"
)

// FlushName is the name of a bucket's one Flushes definition:
// /mayfly/flush/BUCKET/state.
const FlushName = "state"

// FlushState is a bucket's latest flush as the cluster records it: asked
// by one node (AskFlush), done by every node, each partition by its
// leader (engine.Bucket.StartFlush), which record here the cut each
// partition is flushed up to and the partitions finished (UpdateFlush).
// Its own key, not the collections manifest: a memcached bucket has no
// manifest, a flush changes no collection (the manifest's UID stays), and
// the passes' records would race the manifest's edits.
type FlushState struct {
	// Rev counts the bucket's flushes, from 1.
	Rev uint64 `json:"rev"`
	// UUID is the bucket's incarnation the flush is of: a bucket created
	// again under the name does not take it up.
	UUID string `json:"uuid"`
	// At is when the flush was asked (the asking node's clock, Unix
	// seconds), for the record.
	At int64 `json:"at"`
	// Parts is the bucket's number of partitions.
	Parts int `json:"partitions"`
	// Cuts is, by partition, the sequence number it is flushed up to:
	// the first one recorded, by the first node that took it up as its
	// leader.
	Cuts map[int]uint64 `json:"cuts,omitempty"`
	// Done lists the partitions finished, sorted.
	Done []int `json:"done,omitempty"`
}

// Finished returns, one flag a partition, those recorded finished.
func (s FlushState) Finished() []bool {
	out := make([]bool, s.Parts)
	for _, p := range s.Done {
		if p >= 0 && p < s.Parts {
			out[p] = true
		}
	}
	return out
}

// Complete reports whether every partition is finished.
func (s FlushState) Complete() bool {
	return s.Parts > 0 && !slices.Contains(s.Finished(), false)
}

// ParseFlush decodes a bucket's flush record (a Flushes Def's Value).
func ParseFlush(value []byte) (FlushState, error) {
	var s FlushState
	if err := json.Unmarshal(value, &s); err != nil {
		return FlushState{}, fmt.Errorf("cluster: a flush record: %w", err)
	}
	return s, nil
}

// AskFlush records a new flush of bucket (incarnation uuid, parts
// partitions), asked at at: the next revision, no cut and no partition
// finished yet. It returns the record and the etcd revision of the write;
// every node takes it up from its mirror. ErrUnavailable as
// PutDesignDoc's.
func AskFlush(ctx context.Context, cli *clientv3.Client, bucket, uuid string, parts int, at int64) (FlushState, int64, error) {
	var (
		st  FlushState
		rev int64
	)
	err := bounded(ctx, func(ctx context.Context) error {
		var err error
		st, rev, err = updateFlush(ctx, cli, bucket, func(s *FlushState) error {
			*s = FlushState{Rev: s.Rev + 1, UUID: uuid, At: at, Parts: parts}
			return nil
		})
		return err
	})
	return st, rev, err
}

// UpdateFlush edits bucket's flush record with revision rev of the
// bucket's incarnation uuid (edit gets the record etcd holds), in a
// transaction conditioned on the record read. It returns the record
// written; engine.ErrFlushSuperseded when etcd holds another flush (a
// later one, none, or one of another incarnation: the bucket was deleted,
// its record with it, and created again, counting its flushes from 1
// again). ErrUnavailable as PutDesignDoc's.
func UpdateFlush(ctx context.Context, cli *clientv3.Client, bucket, uuid string, rev uint64, edit func(s *FlushState)) (FlushState, error) {
	var st FlushState
	err := bounded(ctx, func(ctx context.Context) error {
		var err error
		st, _, err = updateFlush(ctx, cli, bucket, func(s *FlushState) error {
			if s.Rev != rev || s.UUID != uuid {
				return fmt.Errorf("%w: bucket %q is at flush %d of incarnation %q, not %d of %q",
					engine.ErrFlushSuperseded, bucket, s.Rev, s.UUID, rev, uuid)
			}
			edit(s)
			return nil
		})
		return err
	})
	return st, err
}

// updateFlush is the read, edit and conditioned write of bucket's flush
// record, again until no other writer came in between.
func updateFlush(ctx context.Context, cli *clientv3.Client, bucket string, edit func(s *FlushState) error) (FlushState, int64, error) {
	key := defKey(Flushes, bucket, FlushName)
	for {
		resp, err := cli.Get(ctx, key)
		if err != nil {
			return FlushState{}, 0, fmt.Errorf("cluster: reading the flush of bucket %q: %w", bucket, err)
		}
		var st FlushState
		var modRev int64
		if len(resp.Kvs) > 0 {
			if st, err = ParseFlush(resp.Kvs[0].Value); err != nil {
				return FlushState{}, 0, fmt.Errorf("bucket %q: %w", bucket, err)
			}
			modRev = resp.Kvs[0].ModRevision
		}
		if err := edit(&st); err != nil {
			return FlushState{}, 0, err
		}
		data, err := json.Marshal(st)
		if err != nil {
			return FlushState{}, 0, err
		}
		tr, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", modRev)).
			Then(clientv3.OpPut(key, string(data))).Commit()
		if err != nil {
			return FlushState{}, 0, fmt.Errorf("cluster: writing the flush of bucket %q: %w", bucket, err)
		}
		if tr.Succeeded {
			return st, tr.Header.Revision, nil
		}
	}
}
