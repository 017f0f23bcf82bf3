package replica

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/cluster"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/internal/testport"
)

// freeTriple finds a loopback port P with P+1 and P+2 free too (a node's
// cluster port and its etcd ports), reserved until t ends.
func freeTriple(t *testing.T) int {
	return testport.Consecutive(t, 3)
}

// TestMembershipFromEtcd runs the real path: three cluster nodes (etcd
// members) place a bucket; each node's Host listens on its cluster port,
// resolves its peers through etcd's nodes/NAME and runs the partitions of
// the map it is a voter of.
func TestMembershipFromEtcd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var peers []cluster.Peer
	for i := range 3 {
		peers = append(peers, cluster.Peer{Name: fmt.Sprintf("n%d", i+1), Host: "127.0.0.1", Port: freeTriple(t)})
	}
	nodes := make([]*cluster.Node, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i, p := range peers {
		wg.Go(func() {
			nodes[i], errs[i] = cluster.Start(ctx, cluster.Config{Node: p.Name, Peers: peers, DataDir: t.TempDir(),
				LeaseTTL: 3 * time.Second, ReconcileInterval: 100 * time.Millisecond})
		})
	}
	wg.Wait()
	defer func() {
		var wg sync.WaitGroup
		for _, n := range nodes {
			if n != nil {
				wg.Go(func() { n.Close() })
			}
		}
		wg.Wait()
	}()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("starting %s: %v", peers[i].Name, err)
		}
	}
	cli := nodes[0].Client()
	if err := cluster.DefineBucket(ctx, cli, cluster.BucketDef{BucketSettings: engine.DefaultBucketSettings("b")}); err != nil {
		t.Fatal(err)
	}
	var pm *cluster.PartitionMap
	eventually(t, "the bucket placed", func() error {
		m, _, err := cluster.ReadMap(ctx, cli, "b")
		if err == nil && m == nil {
			err = fmt.Errorf("no map yet")
		}
		pm = m
		return err
	})
	// The first 8 partitions: enough to cross every pair of nodes.
	const parts = 8
	hosts := map[string]*Host{}
	sms := map[string]map[GroupID]*kvMachine{}
	for i, p := range peers {
		h, err := Open(Options{Dir: filepath.Join(t.TempDir(), "cluster", "raft"), Node: p.Name, Listen: p.Addr(),
			Resolver: ClusterResolver(nodes[i].Client())})
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		hosts[p.Name], sms[p.Name] = h, map[GroupID]*kvMachine{}
		for _, mg := range MapGroups(pm, p.Name) {
			if mg.Partition >= parts {
				continue
			}
			sm := newKV()
			if err := h.AddGroup(GroupID(mg.Partition), mg.Voters, sm); err != nil {
				t.Fatal(err)
			}
			sms[p.Name][GroupID(mg.Partition)] = sm
		}
	}
	for part := range parts {
		g, want := GroupID(part), pm.Partitions[part]
		eventually(t, fmt.Sprintf("partition %d acknowledges", part), func() error {
			pctx, pcancel := context.WithTimeout(ctx, 3*time.Second)
			defer pcancel()
			_, err := hosts[want.Leader].Propose(pctx, g, []byte("k=v"))
			return err
		})
		for _, v := range want.Voters {
			eventually(t, fmt.Sprintf("partition %d applied on %s", part, v), func() error {
				if got, _ := sms[v][g].get("k"); got != "v" {
					return fmt.Errorf("k = %q", got)
				}
				return nil
			})
		}
		if l, ok := hosts[want.Leader].Leader(g); !ok || !slices.Contains(want.Voters, l) {
			t.Errorf("partition %d: leader %q, not one of the map's voters %v", part, l, want.Voters)
		}
	}
}
