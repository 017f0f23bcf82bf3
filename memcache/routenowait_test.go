package memcache

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
)

// TestRouteNeverWaitsOnAnEventLoop: Options.Route may wait for a
// partition's leader (a cluster node's router waits up to an election
// timeout for one), but an event loop serves many connections: there it
// gets a context already done, and a key whose leader is not known is
// answered at once, its SERVER_ERROR the route's refusal, while the other
// connections are served.
func TestRouteNeverWaitsOnAnEventLoop(t *testing.T) {
	noLeader := fmt.Errorf("%w: partition 9 has no leader at the moment; retry shortly", engine.ErrNotMyVBucket)
	route := func(ctx context.Context, key string) (Route, error) {
		if !strings.HasPrefix(key, "electing") {
			return Route{}, nil
		}
		select { // as the router waits for a leader
		case <-ctx.Done():
		case <-time.After(10 * time.Minute):
		}
		return Route{}, noLeader
	}
	f := bareFixture(t, &Options{IO: IOEventLoop, Route: route})
	a, b := f.dial(t), f.dial(t)
	a.send("get electing1\r\n")
	b.do("set k 0 0 1\r\nx\r\n", "STORED\r\n")
	if got := a.line(); !strings.HasPrefix(got, "SERVER_ERROR not my vbucket: partition 9 has no leader") {
		t.Fatalf("a get whose partition's leader is not known: %q", got)
	}
	a.send("set electing2 0 0 1\r\nx\r\n")
	if got := a.line(); !strings.HasPrefix(got, "SERVER_ERROR not my vbucket: partition 9 has no leader") {
		t.Fatalf("a set whose partition's leader is not known: %q", got)
	}
	a.do("get k\r\n", "VALUE k 0 1\r\nx\r\nEND\r\n")
}
