// Package racebuild says whether the binary was built with the race
// detector (go build -race, go test -race), and sizes tests by it.
//
// A test that runs thousands of sequential steps through code that starts
// no goroutine, or that checks a bound (memory, sizes) on paths other tests
// take under the race detector, gains nothing from it but a run 5 to 40
// times slower: it calls Skip, and `make test` runs it in a step of its own
// without -race (the Makefile's norace target, which finds such tests by
// their call of Skip or Scale: .ci/noracetargets). A model test whose code
// under test does run goroutines calls Scale for its step count: a quarter
// under -race, for the races, and its full run in the norace step.
package racebuild

import "testing"

// Skip skips t when the race detector is on: t runs in make test's norace
// step instead.
func Skip(t testing.TB) {
	t.Helper()
	if Enabled {
		t.Skip("the race detector's cost with no race to find here: make test runs this without -race (make norace)")
	}
}

// Scale returns n, or a quarter of it (at least 1) when the race detector
// is on: make test runs the test whole in its norace step.
func Scale(n int) int {
	if Enabled {
		return max(1, n/4)
	}
	return n
}
