// Package enginetest opens the engine the way the tests of the packages
// above it need it: in a test's temporary directory, closed when the test
// ends.
package enginetest

import (
	"context"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// DefaultBucket opens an engine of 8 partitions on clk, without fsync, in a
// temporary directory of t, with its bucket "default" at the default
// settings, and returns both; the engine closes when the test ends, after
// what the test registers later (t.Cleanup runs last in, first out).
func DefaultBucket(t testing.TB, clk *engine.FakeClock) (*engine.Engine, *engine.Bucket) {
	t.Helper()
	eng, err := engine.Open(t.TempDir(), &engine.Options{Clock: clk, NumPartitions: 8, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	b, err := eng.CreateBucket(context.Background(), engine.DefaultBucketSettings("default"))
	if err != nil {
		t.Fatal(err)
	}
	return eng, b
}
