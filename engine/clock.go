package engine

import (
	"sync"
	"time"
)

// Clock tells the time in whole Unix seconds. Every expiry decision in Mayfly
// reads one Clock, so tests can move time by hand.
type Clock interface {
	// Now returns the current Unix time in seconds.
	Now() int64
}

// SystemClock is the wall clock.
type SystemClock struct{}

// Now returns the wall clock's Unix time in seconds.
func (SystemClock) Now() int64 { return time.Now().Unix() }

// FakeClock is a Clock that moves only when told to. It is safe for concurrent use.
type FakeClock struct {
	mu  sync.Mutex
	now int64
}

// NewFakeClock returns a FakeClock set to start (Unix seconds).
func NewFakeClock(start int64) *FakeClock { return &FakeClock{now: start} }

// Now returns the fake time.
func (c *FakeClock) Now() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by sec seconds (backward if negative).
func (c *FakeClock) Advance(sec int64) {
	c.mu.Lock()
	c.now += sec
	c.mu.Unlock()
}

// Set moves the clock to t (Unix seconds).
func (c *FakeClock) Set(t int64) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// stopwatch returns the wall clock, for measuring how long something took
// (a statistic such as ep_warmup_time), never for an expiry decision.
func stopwatch() time.Time { return time.Now() }
