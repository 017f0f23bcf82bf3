package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/couchbase/gocbcore/v10/memd"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/mayflydb/mayfly/cluster"
)

// TestClusterConfigOneLayoutPerRevAcrossTransfers: three processes; while
// the partitions' leaderships are handed over (the map's preferred leaders
// rotated, six times: every node's groups transfer to them), every node's
// bucket configuration is read over and over, and no two configurations
// with one rev, from any nodes, name different leaders; after each
// rotation every node serves the new leaders. Before, a node named the
// leader its own Raft group knew at once, under the rev of the last
// record, while the others still named the old one there (for up to the
// 250 ms poll that recorded the change): an SDK holding the old layout
// ignored the new one at the same rev and sent the partition's keys to
// the old leader, answered NOT_MY_VBUCKET, until the rev moved.
func TestClusterConfigOneLayoutPerRevAcrossTransfers(t *testing.T) {
	const rotations = 6
	nodes, peers := startedKVCluster(t)
	eventuallyT(t, "the default bucket placed", func() error {
		_, err := readDefaultMap(peers)
		return err
	})
	kvOf := map[string]string{} // node name -> KV address
	for _, n := range nodes {
		kvOf[n.name] = n.kv
	}
	// leaders reads node n's configuration (HTTP): its rev and each
	// partition's leader.
	leaders := func(n *procNode) (int64, []string, error) {
		var c kvConfig
		if err := nodeReq(n, "GET", "/pools/default/b/default", &c); err != nil {
			return 0, nil, err
		}
		return c.Rev, c.leaders(), nil
	}
	// servesMap waits until every partition's group is led by m's
	// preferred leader, recorded (the latest record naming it in etcd),
	// and every node's configuration names it.
	servesMap := func(what string, m *cluster.PartitionMap) {
		t.Helper()
		eventuallyT(t, what, func() error {
			if err := recordsFollowMap(peers, m); err != nil {
				return err
			}
			for _, n := range nodes {
				rev, ls, err := leaders(n)
				if err != nil {
					return err
				}
				if len(ls) != len(m.Partitions) {
					return fmt.Errorf("%s's configuration at rev %d has %d partitions, want %d", n.name, rev, len(ls), len(m.Partitions))
				}
				for p, part := range m.Partitions {
					if ls[p] != kvOf[part.Leader] {
						return fmt.Errorf("%s's configuration at rev %d names %q as partition %d's leader, want %s (%s)", n.name, rev, ls[p], p, part.Leader, kvOf[part.Leader])
					}
				}
			}
			return nil
		})
	}
	m, err := readDefaultMap(peers)
	if err != nil {
		t.Fatal(err)
	}
	servesMap("every node naming the placed leaders", m)

	// The readers: every configuration read, by rev.
	type seen struct {
		node    string
		leaders []string
	}
	var (
		mu       sync.Mutex
		byRev    = map[int64]seen{}
		reads    int
		conflict error
		want     []string             // the leaders of the last rotation
		servedAt map[string]time.Time // when each node first served want
	)
	// Each node's configuration read on its KV port, as an SDK reads it
	// (GET_CLUSTER_CONFIG), over and over on one connection.
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, n := range nodes {
		nc, err := net.Dial("tcp", n.kv)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		mc, _ := kvBootstrap(t, nc)
		wg.Go(func() {
			for ctx.Err() == nil {
				nc.SetDeadline(time.Now().Add(time.Minute))
				if err := mc.WritePacket(&memd.Packet{Magic: memd.CmdMagicReq, Command: memd.CmdGetClusterConfig}); err != nil {
					return
				}
				r, _, err := mc.ReadPacket()
				if err != nil {
					return
				}
				var c kvConfig
				if r.Status != memd.StatusSuccess || json.Unmarshal(r.Value, &c) != nil {
					continue
				}
				rev, ls := c.Rev, c.leaders()
				mu.Lock()
				reads++
				if _, ok := servedAt[n.name]; !ok && want != nil && slices.Equal(ls, want) {
					servedAt[n.name] = time.Now()
				}
				if was, ok := byRev[rev]; !ok {
					byRev[rev] = seen{n.name, ls}
				} else if !slices.Equal(was.leaders, ls) && conflict == nil {
					p := 0
					for p < len(ls) && p < len(was.leaders) && ls[p] == was.leaders[p] {
						p++
					}
					conflict = fmt.Errorf("at rev %d %s's configuration and %s's differ first at partition %d: %v and %v",
						rev, was.node, n.name, p, was.leaders, ls)
				}
				mu.Unlock()
				time.Sleep(time.Millisecond) // other tests share the cores
			}
		})
	}
	defer func() { stop(); wg.Wait() }()

	for round := range rotations {
		mu.Lock()
		want, servedAt = nil, map[string]time.Time{}
		mu.Unlock()
		start := time.Now()
		m = rotateLeaders(t, peers)
		mu.Lock()
		want = make([]string, len(m.Partitions))
		for p, part := range m.Partitions {
			want[p] = kvOf[part.Leader]
		}
		mu.Unlock()
		servesMap(fmt.Sprintf("every node naming the rotated leaders (rotation %d)", round+1), m)
		mu.Lock()
		var last time.Duration
		for _, at := range servedAt {
			last = max(last, at.Sub(start))
		}
		mu.Unlock()
		t.Logf("rotation %d: every node's KV configuration named the new leaders %v after the map's write", round+1, last.Round(time.Millisecond))
	}
	stop()
	wg.Wait()
	t.Logf("%d configurations read at %d revs", reads, len(byRev))
	if conflict != nil {
		t.Fatal(conflict)
	}
}

// leaders returns the KV address of each partition's leader c names
// ("$HOST" read as 127.0.0.1, where every test node listens; "" where none
// is named).
func (c *kvConfig) leaders() []string {
	m := c.VBucketServerMap
	out := make([]string, len(m.VBucketMap))
	for p, row := range m.VBucketMap {
		if len(row) == 0 || row[0] < 0 || row[0] >= len(m.ServerList) {
			continue
		}
		addr := m.ServerList[row[0]]
		if port, ok := strings.CutPrefix(addr, "$HOST:"); ok {
			addr = "127.0.0.1:" + port
		}
		out[p] = addr
	}
	return out
}

// recordsFollowMap says whether the latest record naming each of m's
// partitions (cluster.PublishLeads) is its preferred leader's: the group
// elected it, and it recorded so.
func recordsFollowMap(peers []string, m *cluster.PartitionMap) error {
	return withPeersClient(peers, func(ctx context.Context, cli *clientv3.Client) error {
		prefix := "/mayfly/layout/" + m.Bucket + "/"
		resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
		if err != nil {
			return err
		}
		by, at := make([]string, len(m.Partitions)), make([]int64, len(m.Partitions))
		for _, kv := range resp.Kvs {
			var rec cluster.LeadRecord
			if err := json.Unmarshal(kv.Value, &rec); err != nil || rec.UUID != m.UUID {
				continue
			}
			for p := range by {
				if p/8 < len(rec.Led) && rec.Led[p/8]&(1<<(p%8)) != 0 && kv.ModRevision > at[p] {
					by[p], at[p] = strings.TrimPrefix(string(kv.Key), prefix), kv.ModRevision
				}
			}
		}
		for p, part := range m.Partitions {
			if by[p] != part.Leader {
				return fmt.Errorf("partition %d: recorded leader %q, want %s", p, by[p], part.Leader)
			}
		}
		return nil
	})
}

// rotateLeaders rewrites the default bucket's map with each partition's
// preferred leader handed to the next of its voters (a new epoch each):
// every node leads as many partitions as before, so the orchestrator
// moves none back, and every partition's group transfers its leadership.
// It returns the map written.
func rotateLeaders(t *testing.T, peers []string) *cluster.PartitionMap {
	t.Helper()
	var m cluster.PartitionMap
	eventuallyT(t, "the rotated map written", func() error {
		return withPeersClient(peers, func(ctx context.Context, cli *clientv3.Client) error {
			const key = "/mayfly/maps/default"
			resp, err := cli.Get(ctx, key)
			if err != nil {
				return err
			}
			if len(resp.Kvs) != 1 {
				return fmt.Errorf("no map at %s", key)
			}
			m = cluster.PartitionMap{}
			if err := json.Unmarshal(resp.Kvs[0].Value, &m); err != nil {
				return err
			}
			for p, part := range m.Partitions {
				i := slices.Index(part.Voters, part.Leader)
				m.Partitions[p].Leader = part.Voters[(i+1)%len(part.Voters)]
				m.Partitions[p].Epoch++
			}
			data, err := json.Marshal(&m)
			if err != nil {
				return err
			}
			txn, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", resp.Kvs[0].ModRevision)).
				Then(clientv3.OpPut(key, string(data))).Commit()
			if err != nil {
				return err
			}
			if !txn.Succeeded {
				return fmt.Errorf("the map changed while it was rotated")
			}
			return nil
		})
	})
	return &m
}
