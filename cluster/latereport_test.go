package cluster

import (
	"context"
	"slices"
	"sync"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// lateKV passes every request on to etcd but, while held, keeps the
// writes it is given instead and answers them with a deadline: a write
// whose answer never came, which etcd may still apply later (a follower
// forwarded it to the leader it knew, cut off from it; the partition
// healed, the leader it has since applied it). deliver applies what it
// kept, then.
type lateKV struct {
	clientv3.KV
	mu   sync.Mutex
	hold bool
	kept []clientv3.Op
}

func (l *lateKV) keep(op clientv3.Op) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.hold {
		l.kept = append(l.kept, op)
	}
	return l.hold
}

func (l *lateKV) Put(ctx context.Context, key, val string, opts ...clientv3.OpOption) (*clientv3.PutResponse, error) {
	if l.keep(clientv3.OpPut(key, val, opts...)) {
		return nil, context.DeadlineExceeded
	}
	return l.KV.Put(ctx, key, val, opts...)
}

func (l *lateKV) Do(ctx context.Context, op clientv3.Op) (clientv3.OpResponse, error) {
	if !op.IsGet() && l.keep(op) {
		return clientv3.OpResponse{}, context.DeadlineExceeded
	}
	return l.KV.Do(ctx, op)
}

func (l *lateKV) Txn(ctx context.Context) clientv3.Txn {
	return &lateTxn{l: l, ctx: ctx}
}

// lateTxn is a transaction through a lateKV: kept whole while it holds.
type lateTxn struct {
	l                *lateKV
	ctx              context.Context
	cmps             []clientv3.Cmp
	thenOps, elseOps []clientv3.Op
}

func (t *lateTxn) If(cs ...clientv3.Cmp) clientv3.Txn { t.cmps = append(t.cmps, cs...); return t }
func (t *lateTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	t.thenOps = append(t.thenOps, ops...)
	return t
}
func (t *lateTxn) Else(ops ...clientv3.Op) clientv3.Txn {
	t.elseOps = append(t.elseOps, ops...)
	return t
}
func (t *lateTxn) Commit() (*clientv3.TxnResponse, error) {
	if t.l.keep(clientv3.OpTxn(t.cmps, t.thenOps, t.elseOps)) {
		return nil, context.DeadlineExceeded
	}
	return t.l.KV.Txn(t.ctx).If(t.cmps...).Then(t.thenOps...).Else(t.elseOps...).Commit()
}

func (l *lateKV) setHold(hold bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.hold = hold
}

// deliver applies the writes kept, in order, as etcd would once they
// reached its leader.
func (l *lateKV) deliver(ctx context.Context, t *testing.T) {
	l.mu.Lock()
	kept := l.kept
	l.kept = nil
	l.mu.Unlock()
	if len(kept) == 0 {
		t.Fatal("no write was kept")
	}
	for _, op := range kept {
		if _, err := l.KV.Do(ctx, op); err != nil {
			t.Fatal(err)
		}
	}
}

// A lag report whose write got no answer (etcd without a leader at a
// network cut: the chaos isolate4 case) and reached etcd only after the
// newer reports the node wrote since (the cut healed) does not stay the
// node's report: the node, whose replicas all keep up again, reports
// nothing lagging. Before, the late write overwrote the newer report and
// stayed for good, as the node writes its report only when it changes:
// `cluster status` showed a follower lagging for minutes that was not
// (partitions 0 and 64 "probe", 390 entries behind, three minutes after
// the load), and the orchestrator left those partitions' leaderships
// where they were. The shed-left report is written the same way.
func TestLateReportDoesNotOverwriteNewer(t *testing.T) {
	ctx, cli := oneNode(t)
	late := &lateKV{KV: cli.KV}
	through := clientv3.NewCtxClient(ctx)
	defer through.Close()
	through.KV = late

	lagging := []Lagging{{Bucket: "default", Follower: "n1", Why: "probe", Partitions: []int{0, 64}, MaxBehind: 390}}
	down := []Lagging{{Bucket: "default", Follower: "n1", Why: "down", Partitions: []int{0, 1, 2}, MaxBehind: 400}}
	pub := NewLagPublisher(through, "n2")
	if err := pub.Publish(ctx, nil); err != nil { // every replica keeps up
		t.Fatal(err)
	}
	late.setHold(true)
	if err := pub.Publish(ctx, slices.Clone(lagging)); err == nil {
		t.Fatal("a write without an answer succeeded")
	}
	late.setHold(false)
	for _, lags := range [][]Lagging{down, nil, nil} { // the follower down, then removed: nothing lagging
		if err := pub.Publish(ctx, slices.Clone(lags)); err != nil {
			t.Fatal(err)
		}
	}
	late.deliver(ctx, t)
	for range 2 { // the node's next looks: still nothing lagging
		if err := pub.Publish(ctx, nil); err != nil {
			t.Fatal(err)
		}
	}
	reports, err := readLag(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	if got := reports["n2"]; len(got) != 0 {
		t.Fatalf("n2's report after the late write arrived: %+v, want nothing lagging", got)
	}

	// The shed-left report, through the same writer.
	left := NewShedLeftPublisher(through, "n2")
	gone := []ShedLeft{{Bucket: "default", UUID: "u", Partition: 3, Epoch: 4, Nodes: []string{"n3"}}}
	late.setHold(true)
	if err := left.Publish(ctx, slices.Clone(gone)); err == nil {
		t.Fatal("a write without an answer succeeded")
	}
	late.setHold(false)
	if err := left.Publish(ctx, nil); err != nil {
		t.Fatal(err)
	}
	late.deliver(ctx, t)
	if err := left.Publish(ctx, nil); err != nil {
		t.Fatal(err)
	}
	got, err := readShedLeft(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Fatalf("n2's shed-left report after the late write arrived: %v, want none", got)
	}
}
