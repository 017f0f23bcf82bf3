package kv_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"

	"github.com/couchbase/gocbcore/v10/memd"

	"github.com/mayflydb/mayfly/engine"
)

// lateReplicator applies every entry to its bucket, as a group's commit
// would, and then, for the first one, answers as replica.BucketReplicator
// does when a proposal got no answer in MaxProposeWait: an error wrapping
// engine.ErrAmbiguous (an ErrTempFail) whose write may have been (here:
// was) applied.
type lateReplicator struct {
	b    *engine.Bucket
	mu   sync.Mutex
	next uint64
	late bool
}

func (l *lateReplicator) Writable(context.Context, int) error { return nil }

func (l *lateReplicator) Replicate(_ context.Context, part int, entry []byte) (engine.ReplicatedResult, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.next++
	res, err := l.b.ApplyReplicated(part, l.next, entry)
	if err != nil || !l.late {
		return res, err
	}
	l.late = false
	return engine.ReplicatedResult{}, fmt.Errorf("%w: partition %d: no answer in time", engine.ErrAmbiguous, part)
}

// A replicated write whose outcome is unknown (its proposal got no answer in
// time: it may commit, here it did) must not answer TMPFAIL: an SDK takes
// TMPFAIL as "not done" and retries even a write that is not idempotent
// (gocbcore's KV_TEMPORARY_FAILURE allows non-idempotent retries), so an
// increment or an append is applied twice and an insert answers
// DocumentExists for its own document. Couchbase answers such a write
// SYNC_WRITE_AMBIGUOUS (0xa3), which the SDKs raise without retrying.
func TestReplicatedWriteOfUnknownOutcome(t *testing.T) {
	f := newFixture(t)
	r := &lateReplicator{b: f.bucket}
	f.bucket.SetReplicator(r)
	c := f.dial(t)
	c.login(adminUser, adminPass)
	incr := func() *memd.Packet {
		ext := binary.BigEndian.AppendUint64(nil, 1)
		ext = binary.BigEndian.AppendUint64(ext, 0)
		ext = binary.BigEndian.AppendUint32(ext, 0)
		return c.do(&memd.Packet{Command: memd.CmdIncrement, Key: []byte("n"), Extras: ext})
	}
	incr() // creates n at 0
	r.mu.Lock()
	r.late = true
	r.mu.Unlock()
	if a := incr(); a.Status != memd.StatusSyncWriteAmbiguous {
		d, err := f.bucket.DefaultCollection().Get(context.Background(), "n")
		t.Fatalf("an increment whose replication outcome is unknown answered %v (%s), want %v; the document holds %q (%v): a retry would count it twice",
			a.Status, a.Value, memd.StatusSyncWriteAmbiguous, d.Value, err)
	}
}
