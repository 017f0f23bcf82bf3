package kv_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/couchbase/gocbcore/v10/memd"

	"github.com/mayflydb/mayfly/engine"
)

// confirming is the Replicator of a cluster node that leads every
// partition and confirms its reads with refuse's answer (a read index),
// counting them. Its writes are refused (this test writes before the
// bucket replicates).
type confirming struct {
	mu     sync.Mutex
	calls  int
	refuse error
}

func (*confirming) Writable(context.Context, int) error { return nil }
func (*confirming) Leads(int) bool                      { return true }

func (*confirming) Replicate(context.Context, int, []byte) (engine.ReplicatedResult, error) {
	return engine.ReplicatedResult{}, errors.New("no writes in this test")
}

func (c *confirming) ConfirmRead(context.Context, int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	return c.refuse
}

func (c *confirming) set(err error) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refuse = err
	return c.calls
}

// TestReadBarrier: on a cluster node the KV port confirms a read of a
// partition it leads before it answers from its memory (a read index); a
// refused confirmation answers NOT_MY_VBUCKET (the node no longer leads:
// the SDK takes the configuration) or TMPFAIL (it could not confirm in
// time), not the document. Writes take no barrier.
func TestReadBarrier(t *testing.T) {
	f := newFixture(t)
	if _, err := f.bucket.DefaultCollection().Upsert(context.Background(), "k", []byte(`{"v":1}`), nil); err != nil {
		t.Fatal(err)
	}
	r := &confirming{}
	f.bucket.SetReplicator(r)
	c := f.dial(t)
	c.login(adminUser, adminPass)
	c.expect(&memd.Packet{Command: memd.CmdSelectBucket, Key: []byte(bucketName)}, memd.StatusSuccess)

	if p := c.expect(&memd.Packet{Command: memd.CmdGet, Key: []byte("k")}, memd.StatusSuccess); string(p.Value) != `{"v":1}` {
		t.Fatalf("GET: %q", p.Value)
	}
	if n := r.set(fmt.Errorf("%w: partition 3: this node does not lead the group", engine.ErrNotMyVBucket)); n != 1 {
		t.Fatalf("a GET confirmed %d times, want 1", n)
	}
	if p := c.expect(&memd.Packet{Command: memd.CmdGet, Key: []byte("k")}, memd.StatusNotMyVBucket); string(p.Value) == `{"v":1}` {
		t.Fatal("a refused GET answered the document")
	}
	c.expect(&memd.Packet{Command: memd.CmdGetMeta, Key: []byte("k")}, memd.StatusNotMyVBucket)
	r.set(fmt.Errorf("%w: partition 3: could not confirm", engine.ErrTempFail))
	c.expect(&memd.Packet{Command: memd.CmdGet, Key: []byte("k")}, memd.StatusTmpFail)
	before := r.set(nil)
	c.do(&memd.Packet{Command: memd.CmdSet, Key: []byte("k"), Value: []byte(`{}`), Extras: make([]byte, 8)}) // refused by this Replicator
	if n := r.set(nil); n != before {
		t.Fatalf("a write took the read barrier (%d calls, %d before)", n, before)
	}
}
