package replica

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"
)

func qmsg(g GroupID, t pb.MessageType, commit uint64, ctx string) outMsg {
	m := &pb.Message{Type: t.Enum(), To: new(uint64(2)), From: new(uint64(1)), Commit: new(commit)}
	if ctx != "" {
		m.Context = []byte(ctx)
	}
	return outMsg{g: g, m: m}
}

// describe names each message of msgs: group, type, commit (and a quiesce
// mark), in order.
func describe(msgs []outMsg) []string {
	var out []string
	for _, m := range msgs {
		s := fmt.Sprintf("%d:%v:%d", m.g, m.m.GetType(), m.m.GetCommit())
		if m.quiesce {
			s += ":q"
		}
		out = append(out, s)
	}
	return out
}

// A held-up sender's queue keeps one heartbeat and one heartbeat response
// per group, the newest, and writes every other message first, in order:
// a vote or an append's acknowledgement queued behind a thousand groups'
// heartbeats is what kept a group from electing under load.
func TestFrameQueueSupersedesHeartbeatsAndWritesTheRestFirst(t *testing.T) {
	var q frameQueue
	push := func(m outMsg, want pushResult) {
		t.Helper()
		if got := q.push(m, 100); got != want {
			t.Fatalf("push %v: %d, want %d", describe([]outMsg{m}), got, want)
		}
	}
	for tick := range uint64(5) { // five ticks' heartbeats of groups 1 and 2
		res := pushQueued
		if tick > 0 {
			res = pushSuperseded
		}
		push(qmsg(1, pb.MsgHeartbeat, tick, ""), res)
		push(qmsg(2, pb.MsgHeartbeatResp, tick, ""), res)
	}
	push(qmsg(3, pb.MsgVoteResp, 0, ""), pushQueued)
	push(qmsg(1, pb.MsgApp, 4, ""), pushQueued)
	push(qmsg(2, pb.MsgAppResp, 0, ""), pushQueued)
	push(qmsg(2, pb.MsgHeartbeat, 7, ""), pushQueued) // another kind than group 2's response
	if q.len() != 6 {
		t.Fatalf("len %d, want 6", q.len())
	}
	got := describe(q.take())
	want := []string{"3:MsgVoteResp:0", "1:MsgApp:4", "2:MsgAppResp:0",
		"1:MsgHeartbeat:4", "2:MsgHeartbeatResp:4", "2:MsgHeartbeat:7"}
	if !slices.Equal(got, want) {
		t.Fatalf("written %q, want %q", got, want)
	}
	if q.len() != 0 || len(q.take()) != 0 {
		t.Fatal("the queue is not empty after take")
	}
	// Taken, the heartbeats are gone: the next one is queued anew.
	push(qmsg(1, pb.MsgHeartbeat, 5, ""), pushQueued)
}

// A heartbeat carrying a read-index context is not replaced by a later
// one without: only a newer context (raft repeats the latest pending one,
// whose acknowledgement confirms the earlier ones) replaces it.
func TestFrameQueueKeepsReadIndexContexts(t *testing.T) {
	var q frameQueue
	q.push(qmsg(1, pb.MsgHeartbeatResp, 1, "r1"), 100)
	if r := q.push(qmsg(1, pb.MsgHeartbeatResp, 2, ""), 100); r != pushQueued {
		t.Fatalf("a response without context replaced one with: %d", r)
	}
	if r := q.push(qmsg(1, pb.MsgHeartbeatResp, 3, ""), 100); r != pushSuperseded {
		t.Fatalf("a response without context did not replace one without: %d", r)
	}
	if r := q.push(qmsg(1, pb.MsgHeartbeatResp, 4, "r2"), 100); r != pushSuperseded {
		t.Fatalf("a response with context did not replace one without: %d", r)
	}
	got := q.take()
	if len(got) != 2 || string(got[0].m.GetContext()) != "r1" || string(got[1].m.GetContext()) != "r2" {
		t.Fatalf("written %q", describe(got))
	}
}

// A leader's quiesce heartbeat keeps its place among its group's other
// messages (it must arrive after them) and takes out the group's plain
// heartbeat still queued, which would reach the follower after it and
// wake it; a plain heartbeat after it (the group woke) is queued.
func TestFrameQueueQuiesceHeartbeat(t *testing.T) {
	var q frameQueue
	q.push(qmsg(1, pb.MsgHeartbeat, 1, ""), 100)
	q.push(qmsg(1, pb.MsgApp, 2, ""), 100)
	qh := qmsg(1, pb.MsgHeartbeat, 2, "")
	qh.quiesce = true
	if r := q.push(qh, 100); r != pushSuperseded {
		t.Fatalf("quiesce heartbeat: %d, want superseded (the plain one taken out)", r)
	}
	got := describe(q.take())
	if want := []string{"1:MsgApp:2", "1:MsgHeartbeat:2:q"}; !slices.Equal(got, want) {
		t.Fatalf("written %q, want %q", got, want)
	}
	q.push(qh, 100)
	q.push(qmsg(1, pb.MsgHeartbeat, 3, ""), 100)
	if got, want := describe(q.take()), []string{"1:MsgHeartbeat:2:q", "1:MsgHeartbeat:3"}; !slices.Equal(got, want) {
		t.Fatalf("written %q, want %q", got, want)
	}
}

// At a full queue a message that is not a heartbeat evicts the oldest
// heartbeat or response; one that is, or any once none is left, is
// dropped.
func TestFrameQueueFullEvictsHeartbeatsFirst(t *testing.T) {
	var q frameQueue
	const limit = 3
	q.push(qmsg(1, pb.MsgHeartbeat, 1, ""), limit)
	q.push(qmsg(2, pb.MsgHeartbeatResp, 1, ""), limit)
	q.push(qmsg(3, pb.MsgVote, 1, ""), limit)
	if r := q.push(qmsg(4, pb.MsgHeartbeat, 1, ""), limit); r != pushDropped {
		t.Fatalf("a heartbeat at a full queue: %d, want dropped", r)
	}
	if r := q.push(qmsg(1, pb.MsgHeartbeat, 2, ""), limit); r != pushSuperseded {
		t.Fatalf("a newer heartbeat at a full queue: %d, want superseded", r)
	}
	if r := q.push(qmsg(5, pb.MsgAppResp, 1, ""), limit); r != pushEvicted {
		t.Fatalf("an append response at a full queue: %d, want evicted", r)
	}
	if r := q.push(qmsg(6, pb.MsgPreVote, 1, ""), limit); r != pushEvicted {
		t.Fatalf("a pre-vote at a full queue: %d, want evicted", r)
	}
	if r := q.push(qmsg(7, pb.MsgApp, 1, ""), limit); r != pushDropped {
		t.Fatalf("an append at a queue full of others: %d, want dropped", r)
	}
	// Group 1's heartbeat was evicted: its next one is queued anew (the
	// queue has room again once taken).
	got := describe(q.take())
	if want := []string{"3:MsgVote:1", "5:MsgAppResp:1", "6:MsgPreVote:1"}; !slices.Equal(got, want) {
		t.Fatalf("written %q, want %q", got, want)
	}
	if r := q.push(qmsg(1, pb.MsgHeartbeat, 3, ""), limit); r != pushQueued {
		t.Fatalf("group 1's heartbeat after take: %d", r)
	}
}

// An inbound connection's reader holds back (leaving the rest to TCP)
// only while SendQueue messages other than heartbeats wait to be
// stepped: heartbeats and responses, superseded, never hold it back; a
// reader held back returns when the Host closes.
func TestInboxHoldsBackOnlyOtherMessages(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tr := &transport{h: &Host{opts: Options{SendQueue: 2}, ctx: ctx}}
	in := &inbox{ready: make(chan struct{}, 1), room: make(chan struct{}, 1), done: make(chan struct{})}
	for i := range uint64(2) {
		if !tr.deliver(in, qmsg(1, pb.MsgApp, i, "")) {
			t.Fatal("deliver refused an append with room")
		}
	}
	for i := range uint64(50) { // a backlog of heartbeats and responses of 10 groups
		if !tr.deliver(in, qmsg(GroupID(i%10), pb.MsgHeartbeat, i, "")) ||
			!tr.deliver(in, qmsg(GroupID(i%10), pb.MsgHeartbeatResp, i, "")) {
			t.Fatal("deliver refused a heartbeat")
		}
	}
	if got := in.q.len(); got != 2+20 {
		t.Fatalf("inbox holds %d frames, want 2 appends and one heartbeat and response of each of 10 groups", got)
	}
	if got := tr.h.superseded.Load(); got != 80 {
		t.Fatalf("%d superseded, want 80", got)
	}
	res := make(chan bool, 1)
	go func() { res <- tr.deliver(in, qmsg(1, pb.MsgApp, 2, "")) }()
	cancel() // the Host closes while the reader is held back
	if <-res {
		t.Fatal("deliver of a third append with SendQueue 2 queued it")
	}
	if got := in.q.len(); got != 22 {
		t.Fatalf("inbox holds %d frames after the refusal, want 22", got)
	}
}

// The stepper takes what the reader queued, so a reader held back goes
// on: every frame delivered is stepped.
func TestInboxStepperDrains(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stepped atomic.Int64
	h := &Host{opts: Options{SendQueue: 2}, ctx: ctx}
	h.opts.test.beforeStep = func(n int) { stepped.Add(int64(n)) }
	tr := &transport{h: h}
	in := &inbox{ready: make(chan struct{}, 1), room: make(chan struct{}, 1), done: make(chan struct{})}
	tr.wg.Add(1)
	go tr.stepFrames(in)
	for i := range uint64(100) {
		if !tr.deliver(in, qmsg(GroupID(i), pb.MsgAppResp, i, "")) {
			t.Fatal("deliver refused")
		}
	}
	eventually(t, "every frame stepped", func() error {
		if n := stepped.Load(); n != 100 {
			return fmt.Errorf("%d of 100 stepped", n)
		}
		return nil
	})
	close(in.done)
	tr.wg.Wait()
}
