package feed

import (
	"math"
	"runtime/debug"
	"testing"
)

// Memory is near its limit within an eighth of it; without a limit it
// never is.
func TestNearLimit(t *testing.T) {
	for _, c := range []struct {
		used, limit uint64
		want        bool
	}{
		{used: 800, limit: 1000, want: false},
		{used: 875, limit: 1000, want: false},
		{used: 876, limit: 1000, want: true},
		{used: 1200, limit: 1000, want: true},
		{used: 1 << 50, limit: math.MaxInt64, want: false},
	} {
		if got := nearLimit(c.used, c.limit); got != c.want {
			t.Errorf("nearLimit(%d, %d) = %v, want %v", c.used, c.limit, got, c.want)
		}
	}
}

// The default probe reads the runtime's memory and the limit
// debug.SetMemoryLimit set.
func TestMemoryProbe(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	p := newMemoryProbe()
	debug.SetMemoryLimit(math.MaxInt64)
	if p.near() {
		t.Error("near a limit with none set")
	}
	debug.SetMemoryLimit(1 << 40)
	if p.near() {
		t.Error("near a 1 TiB limit")
	}
	debug.SetMemoryLimit(1 << 20) // under what any Go process maps
	if !p.near() {
		t.Error("not near a 1 MiB limit")
	}
}

// BenchmarkMemoryProbe: one look at the memory, as a catch-up takes before
// each batch it reads.
func BenchmarkMemoryProbe(b *testing.B) {
	p := newMemoryProbe()
	b.ReportAllocs()
	for b.Loop() {
		p.near()
	}
}
