package auth

import (
	"net/netip"
	"sync"
	"time"
)

// Throttle sets how failed logins slow down the next tries, per source
// address and per user name. A key (an address, a name) may fail Free
// times; after that each try must wait Base, doubled at every further
// failure up to Max, and a try during the wait is refused without checking
// the password (so it costs the server nothing and counts nothing). A key
// that has not failed for Forget starts afresh; a successful login clears
// its user name's count. A credential verified recently (see
// Options.VerifyCacheTTL) is never throttled.
type Throttle struct {
	// UserFree is how many failures a user name may have before it waits.
	// The default value is 10.
	UserFree int
	// SourceFree is how many failures a source address may have before it
	// waits. The default value is 30.
	SourceFree int
	// Base is the first wait. The default value is 1s.
	Base time.Duration
	// Max is the longest wait. The default value is 1m.
	Max time.Duration
	// Forget is how long after its last failure a key starts afresh. The
	// default value is 15m.
	Forget time.Duration
	// MaxKeys bounds the addresses and names tracked (each); when full,
	// keys whose failures are forgotten are dropped, and a new key is not
	// tracked until there is room. The default value is 65536.
	MaxKeys int
}

// DefaultThrottle returns the throttle a Store uses when Options.Throttle is
// nil.
func DefaultThrottle() *Throttle {
	t := &Throttle{}
	t.EnsureDefaults()
	return t
}

// EnsureDefaults fills in every unset field with its default.
func (t *Throttle) EnsureDefaults() {
	if t.UserFree <= 0 {
		t.UserFree = 10
	}
	if t.SourceFree <= 0 {
		t.SourceFree = 30
	}
	if t.Base <= 0 {
		t.Base = time.Second
	}
	if t.Max < t.Base {
		t.Max = max(time.Minute, t.Base)
	}
	if t.Forget <= 0 {
		t.Forget = 15 * time.Minute
	}
	if t.MaxKeys <= 0 {
		t.MaxKeys = 1 << 16
	}
}

// failures is one key's record.
type failures struct {
	n     int       // failures since the key started afresh
	last  time.Time // the last failure
	until time.Time // tries before this are refused
}

// backoff tracks the failures of one kind of key (addresses, or names).
type backoff struct {
	free              int
	base, max, forget time.Duration
	limit             int
	sweepEvery        time.Duration

	mu        sync.Mutex
	keys      map[string]*failures // REQUIRES: mu
	nextSweep time.Time            // REQUIRES: mu
}

func newBackoff(t *Throttle, free int) *backoff {
	return &backoff{free: free, base: t.Base, max: t.Max, forget: t.Forget, limit: t.MaxKeys,
		keys: map[string]*failures{}, sweepEvery: t.Forget / 4}
}

// wait returns how long key must still wait before its next try (0: it may
// try now).
func (b *backoff) wait(key string, now time.Time) time.Duration {
	if key == "" {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	f := b.keys[key]
	if f == nil || !now.Before(f.until) {
		return 0
	}
	return f.until.Sub(now)
}

// fail records a failed try of key.
func (b *backoff) fail(key string, now time.Time) {
	if key == "" {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	f := b.keys[key]
	if f != nil && now.Sub(f.last) >= b.forget {
		f.n, f.until = 0, time.Time{}
	}
	if f == nil {
		if len(b.keys) >= b.limit {
			b.sweepLocked(now)
		}
		if len(b.keys) >= b.limit {
			return
		}
		f = &failures{}
		b.keys[key] = f
	}
	f.n++
	f.last = now
	if over := f.n - b.free; over >= 0 {
		d := b.max
		if over < 30 && b.base<<over < b.max && b.base<<over > 0 {
			d = b.base << over
		}
		f.until = now.Add(d)
	}
	if now.After(b.nextSweep) {
		b.sweepLocked(now)
	}
}

// clear forgets key's failures (a successful login).
func (b *backoff) clear(key string) {
	b.mu.Lock()
	delete(b.keys, key)
	b.mu.Unlock()
}

// sweepLocked drops the keys whose failures are forgotten.
// REQUIRES: b.mu.
func (b *backoff) sweepLocked(now time.Time) {
	for k, f := range b.keys {
		if now.Sub(f.last) >= b.forget && !now.Before(f.until) {
			delete(b.keys, k)
		}
	}
	b.nextSweep = now.Add(b.sweepEvery)
}

// sourceKey is the key a source address is throttled under: an IPv6
// address's /64 network, since a single host is commonly handed a whole
// /64 and can rotate through its addresses at will (per address it would
// get SourceFree failures from each); an IPv4 address (an IPv4-mapped IPv6
// one too) as it is. A source that is not an address is its own key.
func sourceKey(source string) string {
	a, err := netip.ParseAddr(source)
	if err != nil {
		return source
	}
	a = a.Unmap()
	if a.Is4() {
		return a.String()
	}
	p, err := a.WithZone("").Prefix(64)
	if err != nil {
		return source
	}
	return p.String()
}
