package engine_test

import (
	"context"
	"errors"
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
	t.Cleanup(func() { closeChecked(t, eng) })
	return eng, clk
}

// closeChecked checks every invariant of eng (engine.Check), failing the test
// on a violation, and closes it.
func closeChecked(t testing.TB, eng *engine.Engine) {
	t.Helper()
	if err := eng.Check(context.Background()); err != nil && !errors.Is(err, engine.ErrClosed) {
		t.Errorf("engine.Check: %v", err)
	}
	if err := eng.Close(); err != nil {
		t.Errorf("engine.Close: %v", err)
	}
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
