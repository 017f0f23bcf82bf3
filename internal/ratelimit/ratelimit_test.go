package ratelimit_test

import (
	"sync"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/internal/ratelimit"
)

// fakeTime is a clock moved by hand.
type fakeTime struct {
	mu sync.Mutex
	t  time.Time
}

func (f *fakeTime) now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.t
}

func (f *fakeTime) advance(d time.Duration) {
	f.mu.Lock()
	f.t = f.t.Add(d)
	f.mu.Unlock()
}

func allowN(b *ratelimit.Bucket, n int) (allowed int, lastDropped int64) {
	for range n {
		if ok, d := b.Allow(); ok {
			allowed++
			lastDropped = d
		}
	}
	return allowed, lastDropped
}

// A bucket lets a burst through at once, then refills at its rate as its
// clock moves, never beyond the burst.
func TestBucket(t *testing.T) {
	clk := &fakeTime{t: time.Unix(1000, 0)}
	b := ratelimit.New(2, 5, clk.now)
	if n, _ := allowN(b, 20); n != 5 {
		t.Fatalf("first burst: %d allowed, want 5", n)
	}
	clk.advance(time.Second) // two tokens
	ok, dropped := b.Allow()
	if !ok || dropped != 15 {
		t.Fatalf("after a second: Allow() = %v, %d; want true, 15 (the refusals since the last one allowed)", ok, dropped)
	}
	if ok, _ := b.Allow(); !ok {
		t.Fatal("second token of the refill refused")
	}
	if ok, _ := b.Allow(); ok {
		t.Fatal("a third token after a second at rate 2")
	}
	clk.advance(250 * time.Millisecond) // half a token
	if ok, _ := b.Allow(); ok {
		t.Fatal("a token after a quarter second at rate 2")
	}
	clk.advance(250 * time.Millisecond) // now a whole one
	if ok, d := b.Allow(); !ok || d != 2 {
		t.Fatalf("after half a second: Allow() = %v, %d; want true, 2", ok, d)
	}
	clk.advance(time.Hour)
	if n, _ := allowN(b, 100); n != 5 {
		t.Fatalf("after an hour: %d allowed, want the burst of 5", n)
	}
}

// A clock that goes back neither refills nor breaks the bucket.
func TestBucketClockBack(t *testing.T) {
	clk := &fakeTime{t: time.Unix(1000, 0)}
	b := ratelimit.New(1, 1, clk.now)
	if ok, _ := b.Allow(); !ok {
		t.Fatal("first token refused")
	}
	clk.advance(-time.Hour)
	if ok, _ := b.Allow(); ok {
		t.Fatal("a token after the clock went back")
	}
	clk.advance(time.Hour + time.Second)
	if ok, _ := b.Allow(); !ok {
		t.Fatal("no token a second after the original time")
	}
}

// Each key of a Keyed has its own budget.
func TestKeyed(t *testing.T) {
	clk := &fakeTime{t: time.Unix(1000, 0)}
	k := ratelimit.NewKeyed(1, 3, clk.now)
	for _, key := range []string{"a", "b"} {
		allowed := 0
		for range 10 {
			if ok, _ := k.Allow(key); ok {
				allowed++
			}
		}
		if allowed != 3 {
			t.Errorf("key %s: %d allowed, want 3", key, allowed)
		}
	}
	clk.advance(time.Second)
	if ok, d := k.Allow("a"); !ok || d != 7 {
		t.Errorf("a after a second: %v, %d; want true, 7", ok, d)
	}
}

// Concurrent callers never get more than the burst between refills.
func TestBucketConcurrent(t *testing.T) {
	clk := &fakeTime{t: time.Unix(1000, 0)}
	b := ratelimit.New(1, 50, clk.now)
	var wg sync.WaitGroup
	var mu sync.Mutex
	allowed := 0
	for range 8 {
		wg.Go(func() {
			n, _ := allowN(b, 100)
			mu.Lock()
			allowed += n
			mu.Unlock()
		})
	}
	wg.Wait()
	if allowed != 50 {
		t.Errorf("%d allowed, want 50", allowed)
	}
}
