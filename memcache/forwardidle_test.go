package memcache

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestForwardAfterLeaderClosedIdlePooledConnection: a command forwarded
// over a pooled connection the leader has since closed as idle (its
// --memcached-idle-timeout shorter than the pool's reuse window) is
// answered as the leader answers it, on a fresh connection: the stale one
// carried nothing. A review found the client was answered a SERVER_ERROR
// instead ("a write's outcome is unknown" for a set that was never
// applied, and an error for a plain get).
func TestForwardAfterLeaderClosedIdlePooledConnection(t *testing.T) {
	forEachIO(t, func(t *testing.T, io IOModel) {
		t.Cleanup(func() { checkNoLeaks(t) })
		leader := bareFixture(t, &Options{IO: io, IdleTimeout: 300 * time.Millisecond})
		route := func(_ context.Context, key string) (Route, error) {
			if strings.HasPrefix(key, "far") {
				return Route{Node: "lead", Addr: leader.addr}, nil
			}
			return Route{}, nil
		}
		follower := bareFixture(t, &Options{IO: io, Route: route})
		c := follower.dial(t)

		for i := range 3 {
			before := leader.srv.Stats().IdleKicks
			c.do(fmt.Sprintf("set far%d 0 0 1\r\nx\r\n", i), "STORED\r\n")
			// The leader closes the pooled forwarding connection as idle.
			deadline := time.Now().Add(30 * time.Second)
			for leader.srv.Stats().IdleKicks <= before {
				if time.Now().After(deadline) {
					t.Fatalf("the leader never closed the idle forwarding connection")
				}
				time.Sleep(20 * time.Millisecond)
			}
			time.Sleep(50 * time.Millisecond) // its FIN reaches the follower
			c.send(fmt.Sprintf("set far%d 0 0 1\r\ny\r\n", i))
			if got := c.line(); got != "STORED\r\n" {
				t.Fatalf("a set forwarded after the leader closed the idle pooled connection: %q, want STORED", got)
			}
			if d, err := leader.bucket.DefaultCollection().Get(context.Background(), fmt.Sprintf("far%d", i)); err != nil || string(d.Value) != "y" {
				t.Fatalf("the leader holds %+v, %v", d, err)
			}
			before = leader.srv.Stats().IdleKicks
			for leader.srv.Stats().IdleKicks <= before {
				if time.Now().After(deadline) {
					t.Fatalf("the leader never closed the idle forwarding connection")
				}
				time.Sleep(20 * time.Millisecond)
			}
			time.Sleep(50 * time.Millisecond)
			c.do(fmt.Sprintf("get far%d\r\n", i), fmt.Sprintf("VALUE far%d 0 1\r\ny\r\nEND\r\n", i))
		}
	})
}
