package replica

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3"
)

// transfer hands group g's leadership from node from to node to, as
// steer does (RawNode.TransferLeader), and waits until every node sees
// to lead it.
func (c *testCluster) transfer(t *testing.T, g GroupID, from, to string) {
	t.Helper()
	grp, err := c.host(from).group(g)
	if err != nil {
		t.Fatal(err)
	}
	grp.withRaft(func(rn *raft.RawNode) { rn.TransferLeader(NodeID(to)) })
	c.host(from).enqueue(grp)
	eventually(t, fmt.Sprintf("group %d led by %s", g, to), func() error {
		for _, n := range testNodes {
			if l, _ := c.host(n).Leader(g); l != to {
				// A transfer raft abandoned (an election timeout) is asked again.
				if l == from {
					grp.withRaft(func(rn *raft.RawNode) { rn.TransferLeader(NodeID(to)) })
					c.host(from).enqueue(grp)
				}
				return fmt.Errorf("%s sees %q", n, l)
			}
		}
		return nil
	})
}

// fateStream proposes unique keys to group g from writers goroutines,
// each through the node that leads the group as n1 sees it, until stop
// closes; each attempt's key and error go to record.
func fateStream(ctx context.Context, c *testCluster, g GroupID, writers int, viaAll bool, stop <-chan struct{}, record func(key string, err error)) *sync.WaitGroup {
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				lead, ok := c.host("n1").Leader(g)
				if !ok {
					time.Sleep(5 * time.Millisecond)
					continue
				}
				key := fmt.Sprintf("w%d-%d", w, i)
				pctx, cancel := context.WithTimeout(ctx, time.Minute) // a hang guard: the fate is known long before
				via := lead
				if viaAll {
					via = testNodes[w%len(testNodes)]
				}
				_, err := c.host(via).Propose(pctx, g, []byte(key+"=x"))
				cancel()
				record(key, err)
				if err != nil {
					time.Sleep(5 * time.Millisecond)
				}
			}
		}()
	}
	return &wg
}

// TestTransferTellsEachWriteItsFate: writes streaming into a group while
// its leadership is handed from node to node (every node connected) are
// never answered "outcome unknown": each is applied (and answered so),
// refused before it was proposed, or answered ErrDropped, and then it is
// applied nowhere. A transferee holds all of its predecessor's log, so
// what the old leader appended commits under the new one.
func TestTransferTellsEachWriteItsFate(t *testing.T) {
	c := newTestCluster(t, 1, nil, false)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const g = GroupID(0)
	if _, err := c.propose(ctx, "n1", g, "warm=1"); err != nil {
		t.Fatal(err)
	}
	lead := c.leaderOf(t, g, testNodes)

	var mu sync.Mutex
	done := map[string]bool{} // key -> applied (true) or not proposed / dropped (false)
	var bad []string
	record := func(key string, err error) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err == nil:
			done[key] = true
		case errors.Is(err, ErrDropped), errors.Is(err, ErrNoLeader), errors.Is(err, ErrBusy):
			done[key] = false
		default:
			bad = append(bad, fmt.Sprintf("%s: %v", key, err))
		}
	}
	acked := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, ok := range done {
			if ok {
				n++
			}
		}
		return n
	}
	stop := make(chan struct{})
	wg := fateStream(ctx, c, g, 8, true, stop, record)
	for range 6 {
		before := acked()
		eventually(t, "writes acknowledged between transfers", func() error {
			if n := acked(); n < before+50 {
				return fmt.Errorf("%d acknowledged since the last transfer", n-before)
			}
			return nil
		})
		to := testNodes[(slices.Index(testNodes, lead)+1)%len(testNodes)]
		c.transfer(t, g, lead, to)
		lead = to
	}
	close(stop)
	wg.Wait()
	nacked := acked()

	mu.Lock()
	defer mu.Unlock()
	for _, b := range bad {
		t.Errorf("a write across a transfer, every node connected: %s", b)
	}
	// Everything acknowledged reaches every node; then a last write
	// through the leader, applied everywhere, shows that nothing else is
	// on its way.
	if _, err := c.propose(ctx, lead, g, "last=1"); err != nil {
		t.Fatal(err)
	}
	for _, n := range testNodes {
		eventually(t, n+" applies the last write", func() error {
			if _, ok := c.sm(n, g).get("last"); !ok {
				return errors.New("not yet")
			}
			return nil
		})
		for _, b := range bad {
			k, _, _ := strings.Cut(b, ":")
			_, ok := c.sm(n, g).get(k)
			t.Logf("DIAG %s %s applied=%v", n, k, ok)
		}
		for key, applied := range done {
			if _, ok := c.sm(n, g).get(key); ok != applied {
				t.Errorf("%s: %s applied %v, its writer was told applied %v", n, key, ok, applied)
			}
		}
	}
	t.Logf("%d writes, %d acknowledged", len(done), nacked)
}
