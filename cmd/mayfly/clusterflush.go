package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/mayflydb/mayfly/cluster"
	"github.com/mayflydb/mayfly/engine"
)

// flushWait bounds how long a cluster flush (doFlush, flush_all) waits
// for every partition to be finished before it answers that the flush goes
// on in the background (engine.ErrFlushPending).
const flushWait = 60 * time.Second

// A cluster bucket's flush (engine/replflush.go has the engine's side).
// The node asked records a new flush in etcd (/mayfly/flush/BUCKET/state:
// the next revision, the bucket's UUID, no cut, nothing finished), every
// node takes it up from its mirror (applyFlush: engine.Bucket.StartFlush
// with a ledger onto that record), and each partition's leader deletes
// its documents up to the cut it fixes in the record, then records the
// partition finished. The node asked answers once the record says every
// partition is finished, whichever nodes did them.

// flushChanged is the flush mirror's callback: the bucket's flush is
// taken up again (its flush alone: its other definitions did not change),
// and a flush waiting for its end looks again.
func (c *clusterDefs) flushChanged(bucket string) {
	c.markFlushDirty(bucket)
	c.flushMu.Lock()
	close(c.flushCh)
	c.flushCh = make(chan struct{})
	c.flushMu.Unlock()
}

// flushChange returns a channel closed at the flush mirror's next change.
func (c *clusterDefs) flushChange() <-chan struct{} {
	c.flushMu.Lock()
	defer c.flushMu.Unlock()
	return c.flushCh
}

// flushState returns the flush record the mirror holds for bucket.
func (c *clusterDefs) flushState(bucket string) (cluster.FlushState, bool, error) {
	for _, d := range c.flush.Bucket(bucket) {
		if d.Name == cluster.FlushName {
			st, err := cluster.ParseFlush(d.Value)
			return st, err == nil, err
		}
	}
	return cluster.FlushState{}, false, nil
}

// applyFlush takes up b's latest flush, if the cluster's state holds one
// of this incarnation of b that is not finished everywhere: a node
// restarted mid-flush takes it up again; one that was finished starts no
// pass. Taking up the flush already under way changes nothing.
func (c *clusterDefs) applyFlush(b *engine.Bucket, failed map[string]error) {
	st, ok, err := c.flushState(b.Name())
	if err != nil {
		failed[cluster.FlushName] = err
		return
	}
	if !ok || st.UUID != b.Settings().UUID || st.Parts != b.NumPartitions() || st.Complete() || !b.Replicated() {
		return
	}
	b.StartFlush(st.Rev, &flushLedger{c: c, bucket: b.Name(), uuid: st.UUID, rev: st.Rev, parts: st.Parts})
}

// applyFlushLocked takes up b's latest flush (applyFlush) and nothing
// else of b's definitions: what a change of the flush record asks for.
// It returns why that failed; b is then no longer recorded done, so that
// it is applied whole again after defsRetry.
//
// REQUIRES: c.mu held.
func (c *clusterDefs) applyFlushLocked(b *engine.Bucket) error {
	failed := map[string]error{}
	c.applyFlush(b, failed)
	c.warnFailedLocked(b, failed)
	if len(failed) > 0 {
		delete(c.done, b.Name())
	}
	return failed[cluster.FlushName]
}

// flushLedger is the engine.FlushLedger of one flush: the bucket's flush
// record in etcd (cluster.UpdateFlush), read back from the mirror.
type flushLedger struct {
	c      *clusterDefs
	bucket string
	uuid   string // the bucket's incarnation
	rev    uint64
	parts  int
}

// FixCuts records, in one conditioned write, the cuts proposed for the
// partitions that have none, and returns the recorded ones.
func (l *flushLedger) FixCuts(ctx context.Context, proposed map[int]uint64) (map[int]uint64, error) {
	var out map[int]uint64
	_, err := cluster.UpdateFlush(ctx, l.c.cli, l.bucket, l.uuid, l.rev, func(s *cluster.FlushState) {
		out = make(map[int]uint64, len(proposed))
		if s.Cuts == nil {
			s.Cuts = map[int]uint64{}
		}
		for part, cut := range proposed {
			if _, ok := s.Cuts[part]; !ok {
				s.Cuts[part] = cut
			}
			out[part] = s.Cuts[part]
		}
	})
	return out, err
}

// Finish adds parts to the partitions recorded finished.
func (l *flushLedger) Finish(ctx context.Context, parts []int) error {
	_, err := cluster.UpdateFlush(ctx, l.c.cli, l.bucket, l.uuid, l.rev, func(s *cluster.FlushState) {
		for _, p := range parts {
			if !slices.Contains(s.Done, p) {
				s.Done = append(s.Done, p)
			}
		}
		slices.Sort(s.Done)
	})
	return err
}

// Finished returns the partitions the mirror's record says are finished;
// every one once a later flush replaced this one (its pass covers them),
// or the record is another incarnation's (this one was deleted: nothing
// is left to flush).
func (l *flushLedger) Finished() []bool {
	st, ok, err := l.c.flushState(l.bucket)
	switch {
	case err != nil || !ok:
		return nil
	case st.UUID != l.uuid || st.Rev > l.rev:
		out := make([]bool, l.parts)
		for i := range out {
			out[i] = true
		}
		return out
	case st.Rev < l.rev:
		return nil
	}
	return st.Finished()
}

// FlushBucket flushes b on every node: a new flush recorded in etcd, taken
// up by every node, each partition's documents deleted by its leader up
// to the cut it fixes (engine.Bucket.StartFlush). It answers once every
// partition is finished, with how many documents this node's pass deleted
// (those of the partitions it leads); after flushWait (or ctx's end) it
// answers engine.ErrFlushPending: the flush goes on in the background. A
// bucket this node does not replicate is flushed as one node's
// (engine.Bucket.Flush).
func (c *clusterDefs) FlushBucket(ctx context.Context, b *engine.Bucket) (int, error) {
	if !b.Replicated() {
		return b.Flush(ctx)
	}
	st, rev, err := cluster.AskFlush(ctx, c.cli, b.Name(), b.Settings().UUID, b.NumPartitions(), b.Clock().Now())
	if err != nil {
		return 0, err
	}
	// Taken up here before the wait (every node takes it up from etcd).
	if err := cluster.WaitApplied(ctx, func(ctx context.Context) error { return c.flush.WaitRevision(ctx, rev) }); err != nil {
		return 0, err
	}
	c.mu.Lock()
	err = c.applyFlushLocked(b)
	c.mu.Unlock()
	if err != nil {
		return 0, err
	}
	c.flushMu.Lock()
	wait := c.flushWait
	c.flushMu.Unlock()
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for {
		change := c.flushChange()
		cur, ok, err := c.flushState(b.Name())
		if err != nil {
			return 0, err
		}
		if ok && cur.UUID == st.UUID && cur.Rev >= st.Rev && cur.Complete() {
			// A later flush finished covers this one too.
			return int(b.FlushDeleted(st.Rev)), nil
		}
		select {
		case <-change:
		case <-wctx.Done():
			if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return 0, ctx.Err()
			}
			finished := 0
			if ok && cur.UUID == st.UUID && cur.Rev == st.Rev {
				finished = len(cur.Done)
			}
			return 0, fmt.Errorf("%w (flush %d of bucket %q: %d of %d partitions finished after %s)",
				engine.ErrFlushPending, st.Rev, b.Name(), finished, st.Parts, wait)
		}
	}
}
