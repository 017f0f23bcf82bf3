package engine_test

import (
	"context"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

const t0 = 1_700_000_000 // a fixed "now" for tests

// newEngine opens an engine on a temporary folder with a fake clock; it is
// closed when the test ends.
func newEngine(t testing.TB, dir string) (*engine.Engine, *engine.FakeClock) {
	t.Helper()
	clk := engine.NewFakeClock(t0)
	eng, err := engine.Open(dir, &engine.Options{Clock: clk, NumPartitions: 64, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return eng, clk
}

// newBucket returns a fresh bucket of the given type with a fake clock.
func newBucket(t testing.TB, typ engine.BucketType) (*engine.Bucket, *engine.FakeClock) {
	t.Helper()
	eng, clk := newEngine(t, t.TempDir())
	b, err := eng.CreateBucket(context.Background(), engine.BucketSettings{Name: "b", Type: typ})
	if err != nil {
		t.Fatal(err)
	}
	return b, clk
}
