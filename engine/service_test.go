package engine_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
)

// recorder is a BucketService that writes down what the engine tells it.
type recorder struct {
	name    string
	mu      sync.Mutex
	calls   *[]string
	failFor string        // AttachBucket of this bucket fails
	block   chan struct{} // DetachBucket waits on it when not nil
	waiting chan string   // DetachBucket sends its bucket's name here, when not nil, before it waits on block
}

func (r *recorder) AttachBucket(ctx context.Context, b *engine.Bucket) error {
	r.mu.Lock()
	*r.calls = append(*r.calls, fmt.Sprintf("%s attach %s", r.name, b.Name()))
	r.mu.Unlock()
	if b.Name() == r.failFor {
		return errors.New("no")
	}
	return nil
}

func (r *recorder) DetachBucket(ctx context.Context, b *engine.Bucket, deleted bool) error {
	if r.waiting != nil {
		r.waiting <- b.Name()
	}
	if r.block != nil {
		<-r.block
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	*r.calls = append(*r.calls, fmt.Sprintf("%s detach %s deleted=%v", r.name, b.Name(), deleted))
	return nil
}

// Services attach to every bucket in order and detach in reverse order, on
// create, delete and close.
func TestServicesFollowBucketLife(t *testing.T) {
	ctx := context.Background()
	eng, err := engine.Open(t.TempDir(), &engine.Options{Clock: engine.NewFakeClock(t0), NumPartitions: 8, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "a", Type: engine.Couchbase}); err != nil {
		t.Fatal(err)
	}
	var calls []string
	views, pager := &recorder{name: "views", calls: &calls}, &recorder{name: "pager", calls: &calls, failFor: "bad"}
	for _, s := range []*recorder{views, pager} {
		if err := eng.Attach(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "b", Type: engine.Ephemeral}); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "bad", Type: engine.Couchbase}); err == nil {
		t.Fatal("a bucket whose service failed to attach was created")
	}
	if _, err := eng.Bucket("bad"); !errors.Is(err, engine.ErrBucketNotFound) {
		t.Errorf("failed bucket left behind: %v", err)
	}
	if err := eng.DeleteBucket(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"views attach a", "pager attach a",
		"views attach b", "pager attach b",
		"views attach bad", "pager attach bad", "views detach bad deleted=true",
		"pager detach b deleted=true", "views detach b deleted=true",
		"pager detach a deleted=false", "views detach a deleted=false",
	}
	if !slices.Equal(calls, want) {
		t.Errorf("calls:\n%q\nwant\n%q", calls, want)
	}
}

// While a service takes its time detaching from a deleted bucket, other
// buckets are looked up and written as usual.
func TestDeleteBucketBlocksNoOtherBucket(t *testing.T) {
	ctx := context.Background()
	eng, err := engine.Open(t.TempDir(), &engine.Options{Clock: engine.NewFakeClock(t0), NumPartitions: 8, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer closeChecked(t, eng)
	for _, n := range []string{"slow", "other"} {
		if _, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: n, Type: engine.Couchbase}); err != nil {
			t.Fatal(err)
		}
	}
	var calls []string
	block, waiting := make(chan struct{}), make(chan string, 1)
	if err := eng.Attach(ctx, &recorder{name: "s", calls: &calls, block: block, waiting: waiting}); err != nil {
		t.Fatal(err)
	}
	deleted := make(chan error, 1)
	go func() { deleted <- eng.DeleteBucket(ctx, "slow") }()
	select { // the delete has reached the service, which holds it
	case name := <-waiting:
		if name != "slow" {
			t.Fatalf("DetachBucket(%s), want slow", name)
		}
	case err := <-deleted:
		t.Fatalf("the delete returned (%v) without detaching the service", err)
	case <-time.After(time.Minute):
		t.Fatal("the delete did not reach the service in a minute")
	}
	done := make(chan error, 1)
	go func() {
		b, err := eng.Bucket("other")
		if err == nil {
			_, err = b.DefaultCollection().Upsert(ctx, "k", []byte(`1`), nil)
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Error(err)
		}
	case <-time.After(time.Minute): // only a write that waits for the deletion (held until close(block)) gets here
		t.Error("a write to another bucket waited on the deletion")
	}
	close(block)
	if err := <-deleted; err != nil {
		t.Fatal(err)
	}
}
