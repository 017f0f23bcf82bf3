package memcache

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// movedReplicator is the replication of a node whose route still says it
// leads every partition while its replication group says node "lead"
// does (leadership moved, the map has not caught up). ambiguous set, it
// proposes each write and its outcome is unknown (engine.ErrAmbiguous),
// the error naming lead too; else it refuses each write before proposing
// anything, naming lead (engine.NotMyVBucketError), as
// replica.BucketReplicator does.
type movedReplicator struct {
	mu        sync.Mutex
	ambiguous bool
}

func (m *movedReplicator) setAmbiguous(v bool) {
	m.mu.Lock()
	m.ambiguous = v
	m.mu.Unlock()
}

func (m *movedReplicator) Writable(_ context.Context, part int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ambiguous {
		return nil
	}
	return &engine.NotMyVBucketError{Partition: part, Leader: "lead", Where: "http://elsewhere"}
}

func (m *movedReplicator) Replicate(_ context.Context, part int, _ []byte) (engine.ReplicatedResult, error) {
	return engine.ReplicatedResult{}, fmt.Errorf("%w: partition %d: %w", engine.ErrAmbiguous, part,
		&engine.NotMyVBucketError{Partition: part, Leader: "lead"})
}

// TestReplicatorRefusalFollowed: a write carried out by the node its route
// says leads the key's partition, whose replication then refuses it
// naming the leader before doing anything of it, is carried out by that
// leader, once: sent to that node directly (it sends the command on), or
// through a node that forwards it there (that node's refusal line names
// the leader, and the first node sends the command there). The client
// gets the leader's reply; the document is on the leader alone. A write
// whose outcome is unknown is never sent again, though its error names a
// leader. Before, the client got SERVER_ERROR not my vbucket.
func TestReplicatorRefusalFollowed(t *testing.T) {
	forEachIO(t, func(t *testing.T, io IOModel) {
		t.Cleanup(func() { checkNoLeaks(t) })
		var mu sync.Mutex
		asked := map[string]int{}
		reroutes := func() map[string]int {
			mu.Lock()
			defer mu.Unlock()
			out := asked
			asked = map[string]int{}
			return out
		}
		lead := bareFixture(t, &Options{IO: io})
		toLead := func(node string) func(context.Context, string) (Route, bool) {
			return func(_ context.Context, leader string) (Route, bool) {
				mu.Lock()
				asked[node+">"+leader]++
				mu.Unlock()
				return Route{Node: "lead", Addr: lead.addr}, leader == "lead"
			}
		}
		stale := bareFixture(t, &Options{IO: io, Route: func(context.Context, string) (Route, error) {
			return Route{Reroute: toLead("stale")}, nil
		}})
		first := bareFixture(t, &Options{IO: io, Route: func(context.Context, string) (Route, error) {
			return Route{Node: "stale", Addr: stale.addr, Reroute: toLead("first")}, nil
		}})
		// A counter both copies hold: an incr reads the stale copy, and
		// its write is refused.
		put(t, lead, "ctr", "5", 0)
		put(t, stale, "ctr", "5", 0)
		put(t, lead, "gk", "g", 0) // for a gat, below
		put(t, stale, "gk", "g", 0)
		repl := &movedReplicator{}
		stale.bucket.SetReplicator(repl)
		ctx := context.Background()
		holds := func(key string) string {
			var on []string
			for name, f := range map[string]*fixture{"lead": lead, "stale": stale, "first": first} {
				if _, err := f.bucket.DefaultCollection().Get(ctx, key); err == nil {
					on = append(on, name)
				} else if !errors.Is(err, engine.ErrNotFound) {
					t.Fatalf("reading %s on %s: %v", key, name, err)
				}
			}
			return strings.Join(on, ",")
		}

		ctr := 5
		for _, via := range []struct {
			name string
			f    *fixture
		}{{"stale", stale}, {"first", first}} {
			c := via.f.dial(t)
			key := "k-" + via.name
			c.do("set "+key+" 3 0 2\r\nv1\r\n", "STORED\r\n")
			if d, err := lead.bucket.DefaultCollection().Get(ctx, key); err != nil || string(d.Value) != "v1" || d.Flags != 3 {
				t.Fatalf("via %s: the leader holds %s as %+v, %v", via.name, key, d, err)
			}
			if on := holds(key); on != "lead" {
				t.Fatalf("via %s: %s is on %q; want lead alone", via.name, key, on)
			}
			c.do("add "+key+" 0 0 1\r\nx\r\n", "NOT_STORED\r\n")
			c.do("touch "+key+" 100\r\n", "TOUCHED\r\n")
			if d, _ := lead.bucket.DefaultCollection().Get(ctx, key); d == nil || d.Expiration != t0+100 {
				t.Fatalf("via %s: the leader's %s after a touch: %+v", via.name, key, d)
			}
			ctr++
			c.do("incr ctr 1\r\n", fmt.Sprintf("%d\r\n", ctr))
			c.do("delete "+key+"\r\n", "DELETED\r\n")
			if on := holds(key); on != "" {
				t.Fatalf("via %s: %s is on %q after its delete", via.name, key, on)
			}
			// Pipelined noreply writes keep their order.
			p := "p-" + via.name
			c.do("set "+p+" 0 0 1 noreply\r\na\r\nset "+p+" 0 0 1 noreply\r\nb\r\ntouch "+p+" 0\r\n", "TOUCHED\r\n")
			if d, err := lead.bucket.DefaultCollection().Get(ctx, p); err != nil || string(d.Value) != "b" {
				t.Fatalf("via %s: the leader holds %s as %+v, %v; want the last write's b", via.name, p, d, err)
			}
			if got, want := reroutes(), (map[string]int{via.name + ">lead": 8}); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("via %s: Reroute asked %v; want %v (each write once)", via.name, got, want)
			}
		}
		if d, _ := stale.bucket.DefaultCollection().Get(ctx, "ctr"); d == nil || string(d.Value) != "5" {
			t.Fatalf("the stale node's ctr: %+v; want its own copy untouched", d)
		}
		// A gat the node carries out itself, its touch refused so: the
		// leader answers it and touches its copy.
		c := stale.dial(t)
		c.do("gat 200 gk\r\n", "VALUE gk 0 1\r\ng\r\nEND\r\n")
		if d, _ := lead.bucket.DefaultCollection().Get(ctx, "gk"); d == nil || d.Expiration != t0+200 {
			t.Fatalf("the leader's gk after a gat through the stale node: %+v", d)
		}
		if got, want := reroutes(), (map[string]int{"stale>lead": 1}); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("gat: Reroute asked %v; want %v", got, want)
		}

		repl.setAmbiguous(true)
		for _, via := range []struct {
			name string
			f    *fixture
		}{{"stale", stale}, {"first", first}} {
			c := via.f.dial(t)
			key := "amb-" + via.name
			c.send("set " + key + " 0 0 1\r\nx\r\n")
			if got := c.line(); !strings.HasPrefix(got, "SERVER_ERROR temporary failure") || !strings.Contains(got, "outcome is unknown") {
				t.Fatalf("via %s: a write whose outcome is unknown answered %q", via.name, got)
			}
			if on := holds(key); on != "" {
				t.Fatalf("via %s: a write whose outcome is unknown is on %q; want nowhere", via.name, on)
			}
			if got := reroutes(); len(got) != 0 {
				t.Fatalf("via %s: a write whose outcome is unknown asked Reroute %v", via.name, got)
			}
		}
	})
}
