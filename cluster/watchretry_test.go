package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// An event the follower fails (a node that could not create the bucket
// the cluster defines, or could not read a deleted bucket's tombstone) is
// given to it again, rather than lost until the node restarts: both a
// definition and a deletion come back until the follower takes them.
func TestWatchBucketsRetriesAFailedEvent(t *testing.T) {
	ctx, cli := oneNode(t)
	def := BucketDef{BucketSettings: engine.BucketSettings{Name: "r", Type: engine.Couchbase, UUID: "u1", ReplicaNumber: engine.Replicas(0)}}
	var mu sync.Mutex
	seen := map[string]int{}    // "put r", "delete r": how many times given
	failing := map[string]int{} // how many more times to fail each
	failing["put r"], failing["delete r"] = 2, 2
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		WatchBuckets(wctx, cli, nil, func(ev BucketEvent) error {
			what := "put " + ev.Name
			if ev.Def == nil {
				what = "delete " + ev.Name
			}
			mu.Lock()
			defer mu.Unlock()
			seen[what]++
			if failing[what] > 0 {
				failing[what]--
				return errors.New("injected: could not apply")
			}
			return nil
		})
	}()
	defer func() { stop(); <-done }()
	count := func(what string) int {
		mu.Lock()
		defer mu.Unlock()
		return seen[what]
	}
	if err := DefineBucket(ctx, cli, def); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the definition given again until taken", func() (bool, string) {
		return count("put r") >= 3, fmt.Sprint(count("put r"), " times")
	})
	if ok, err := DeleteBucket(ctx, cli, "r", "u1"); !ok || err != nil {
		t.Fatalf("DeleteBucket: %v %v", ok, err)
	}
	eventually(t, "the deletion given again until taken", func() (bool, string) {
		return count("delete r") >= 3, fmt.Sprint(count("delete r"), " times")
	})
}
