// Package ratelimit is Mayfly's one token bucket: a budget of Burst events
// refilled at Rate events a second, read from an injected clock so that
// tests move time by hand.
//
// The views' warning log (one bucket per message), the JavaScript log(...)
// helper (one bucket per design document) and the KV port's lines about
// logins refused unchecked (one bucket per server) use it.
package ratelimit

import (
	"sync"
	"time"
)

// Bucket is a token bucket. It starts full. It is safe for concurrent use.
type Bucket struct {
	rate  float64 // tokens a second
	burst float64
	now   func() time.Time

	mu      sync.Mutex
	tokens  float64
	last    time.Time // the last refill
	started bool
	dropped int64 // events refused since the last one allowed
}

// New returns a full bucket of burst tokens refilled at rate tokens a
// second, as told by now (time.Now when nil). A rate of 0 never refills.
func New(rate float64, burst int, now func() time.Time) *Bucket {
	if now == nil {
		now = time.Now
	}
	return &Bucket{rate: rate, burst: float64(burst), now: now}
}

// Allow takes a token if there is one. When it does, it also returns how
// many events it refused since the last one it allowed (0 when it refuses),
// so that a caller can say how many lines it suppressed.
func (b *Bucket) Allow() (ok bool, dropped int64) {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.started {
		b.started, b.tokens, b.last = true, b.burst, now
	}
	if now.After(b.last) {
		b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
		b.last = now
	}
	if b.tokens < 1 {
		b.dropped++
		return false, 0
	}
	b.tokens--
	dropped, b.dropped = b.dropped, 0
	return true, dropped
}

// Keyed holds one Bucket per key, all with the same rate and burst: a
// limiter per message, per client, and so on. Keys are never forgotten, so
// use it for a small, fixed set of keys. It is safe for concurrent use.
type Keyed struct {
	rate  float64
	burst int
	now   func() time.Time

	mu    sync.Mutex
	byKey map[string]*Bucket
}

// NewKeyed returns a limiter giving each key its own bucket (see New).
func NewKeyed(rate float64, burst int, now func() time.Time) *Keyed {
	return &Keyed{rate: rate, burst: burst, now: now, byKey: make(map[string]*Bucket)}
}

// Allow is Bucket.Allow on key's bucket.
func (k *Keyed) Allow(key string) (ok bool, dropped int64) {
	k.mu.Lock()
	b := k.byKey[key]
	if b == nil {
		b = New(k.rate, k.burst, k.now)
		k.byKey[key] = b
	}
	k.mu.Unlock()
	return b.Allow()
}
