package chaostest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/mayflydb/mayfly/cluster"
)

// etcdCase kills, each time, the node whose embedded etcd member leads
// (found through etcd's maintenance Status on each member's client port)
// and measures etcd's re-election (until a surviving member names another
// leader) and the orchestrator's (until the cluster's status names an
// orchestrator other than the killed node; when the killed node did not
// orchestrate, until the status reads again, which it may never stop
// doing). The data plane must go on acknowledging writes through every
// kill window.
type etcdCase struct {
	base
	mu    sync.Mutex
	kills []*etcdKill
}

// etcdKill is what one kill of the etcd leader measured.
type etcdKill struct {
	w                    *killWindow
	leaderID, newLeader  uint64
	members              string // what each member said before the kill
	orchBefore, orchNow  string
	etcdElect, orchElect time.Duration // -1: not seen within a minute
}

// etcdEndpoints are the nodes' etcd client URLs, in the nodes' order.
func etcdEndpoints(peers []string) ([]string, error) {
	ps, err := cluster.ParsePeers(strings.Join(peers, ","))
	if err != nil {
		return nil, err
	}
	return cluster.ClientEndpoints(ps, cluster.DefaultEtcdClientOffset), nil
}

// etcdLeader returns the index of the node whose etcd member leads and the
// leader's member ID, asking the members of the nodes serving, and what
// each said.
func etcdLeader(ctx context.Context, r *run) (int, uint64, string, error) {
	eps, err := etcdEndpoints(r.peers)
	if err != nil {
		return 0, 0, "", err
	}
	deadline := time.Now().Add(time.Minute) // wall clock: a hang guard
	for {
		ids := map[uint64]int{}
		var leader uint64
		var said []string
		for i, ep := range eps {
			if !r.nodes[i].serving.Load() {
				continue
			}
			id, lead, err := memberStatus(ctx, ep)
			if err != nil {
				said = append(said, fmt.Sprintf("%s: %v", r.nodes[i].name, err))
				continue
			}
			said = append(said, fmt.Sprintf("%s: member %x, leader %x", r.nodes[i].name, id, lead))
			ids[id] = i
			if lead != 0 {
				leader = lead
			}
		}
		if i, ok := ids[leader]; ok && leader != 0 {
			return i, leader, strings.Join(said, "; "), nil
		}
		if time.Now().After(deadline) { // wall clock: a hang guard
			return 0, 0, "", fmt.Errorf("no etcd member names a leader that answers: %s", strings.Join(said, "; "))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// memberStatus asks the etcd member at ep its ID and the leader it knows
// (0: none).
func memberStatus(ctx context.Context, ep string) (id, leader uint64, err error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	// Not cluster.Connect: it waits for a quorum's read, which would
	// wait out the very election being timed.
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: time.Second, Context: ctx, Logger: zap.NewNop()})
	if err != nil {
		return 0, 0, err
	}
	defer cli.Close()
	st, err := cli.Status(ctx, ep)
	if err != nil {
		return 0, 0, err
	}
	return st.Header.MemberId, st.Leader, nil
}

func (c *etcdCase) victim(ctx context.Context, r *run, _ int) (*node, error) {
	i, id, said, err := etcdLeader(ctx, r)
	if err != nil {
		return nil, err
	}
	st, err := clusterStatus(ctx, r.peers)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.kills = append(c.kills, &etcdKill{leaderID: id, members: said, orchBefore: st.Orchestrator})
	c.mu.Unlock()
	return r.nodes[i], nil
}

func (c *etcdCase) killed(ctx context.Context, r *run, w *killWindow, wg *sync.WaitGroup) {
	c.mu.Lock()
	k := c.kills[len(c.kills)-1]
	c.mu.Unlock()
	k.w = w
	eps, err := etcdEndpoints(r.peers)
	if err != nil {
		r.t.Error(err)
		return
	}
	var survivors []string
	for i, ep := range eps {
		if r.nodes[i].name != w.node {
			survivors = append(survivors, ep)
		}
	}
	k.etcdElect, k.orchElect = -1, -1
	wg.Add(1)
	go func() {
		defer wg.Done()
		var cli *clientv3.Client
		defer func() {
			if cli != nil {
				cli.Close()
			}
		}()
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline) && (k.etcdElect < 0 || k.orchElect < 0); time.Sleep(50 * time.Millisecond) { // wall clock: a hang guard
			// Each time is taken once the answer is in: an upper bound,
			// by at most one poll's round.
			since := func() time.Duration { return time.Duration(r.now() - w.killed) }
			if k.etcdElect < 0 {
				for _, ep := range survivors {
					if _, lead, err := memberStatus(ctx, ep); err == nil && lead != 0 && lead != k.leaderID {
						k.etcdElect, k.newLeader = since(), lead
						break
					}
				}
			}
			if k.orchElect < 0 {
				if cli == nil {
					cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
					c2, err := cluster.Connect(cctx, survivors, time.Second, nil)
					cancel()
					if err != nil {
						continue
					}
					cli = c2
				}
				sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				st, err := cluster.ReadStatus(sctx, cli, nil)
				cancel()
				if err == nil && st.Orchestrator != "" && st.Orchestrator != w.node {
					k.orchElect, k.orchNow = since(), st.Orchestrator
				}
			}
		}
	}()
}

func (c *etcdCase) check(_ context.Context, r *run) {
	t := r.t
	ops := r.hist.ops
	for _, k := range c.kills {
		w := k.w
		// The writes acknowledged while the etcd leader was down (killed →
		// serving again), and the longest time without any.
		var rets []int64
		for _, op := range ops {
			in, out := op.Input.(input), op.Output.(output)
			if in.kind != opGet && out.kind == outOK && op.ClientId != clients && op.Return > w.killed && op.Return < w.resumed {
				rets = append(rets, op.Return)
			}
		}
		slices.Sort(rets)
		gap, prev := time.Duration(0), w.killed
		for _, ret := range append(rets, w.resumed) {
			gap = max(gap, time.Duration(ret-prev))
			prev = ret
		}
		orch := fmt.Sprintf("the orchestrator (%s, not the killed node) kept its term, the status read again after %s", k.orchBefore, dur(k.orchElect))
		switch {
		case k.orchBefore == w.node:
			orch = fmt.Sprintf("the orchestrator (the killed node) replaced by %s after %s", k.orchNow, dur(k.orchElect))
		case k.orchNow != "" && k.orchNow != k.orchBefore:
			orch = fmt.Sprintf("the orchestrator (%s, not the killed node) replaced by %s after %s", k.orchBefore, k.orchNow, dur(k.orchElect))
		}
		t.Logf("etcd leader %s killed at %.1fs (%s): etcd elected another leader (%x) after %s; %s; %d writes acknowledged in the %.1fs until it served again, the longest time without one %v",
			w.node, float64(w.killed)/1e9, k.members, k.newLeader, dur(k.etcdElect), orch, len(rets), float64(w.resumed-w.killed)/1e9, gap.Round(time.Millisecond))
		if len(rets) == 0 {
			t.Errorf("no write acknowledged while the etcd leader %s was down", w.node)
		}
		if k.etcdElect < 0 {
			t.Errorf("etcd elected no other leader within a minute of killing %s", w.node)
		}
		if k.orchElect < 0 {
			t.Errorf("the status named no live orchestrator within a minute of killing %s", w.node)
		}
	}
	if len(c.kills) == 0 {
		t.Errorf("no kill: MAYFLY_CHAOS shorter than %v", killEvery)
	}
}

// dur formats a measured duration, -1 as "never (within a minute)".
func dur(d time.Duration) string {
	if d < 0 {
		return "never (within a minute)"
	}
	return d.Round(10 * time.Millisecond).String()
}
