package views

import (
	"context"
	"fmt"
	"testing"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/internal/enginetest"
)

// newInternalService opens an engine with its default bucket
// (enginetest.DefaultBucket) and a view service over it with opts; both
// close when the test ends. For the tests inside the package.
func newInternalService(t *testing.T, opts *Options) (*engine.Bucket, *Service) {
	t.Helper()
	eng, b := enginetest.DefaultBucket(t, engine.NewFakeClock(1_700_000_000))
	svc, err := New(context.Background(), eng, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	return b, svc
}

// upsertNumbered writes documents k<from>..k<to-1> (keys zero-padded to
// four digits) to b's default collection, each {"n":i}.
func upsertNumbered(t *testing.T, b *engine.Bucket, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		if _, err := b.DefaultCollection().Upsert(context.Background(), fmt.Sprintf("k%04d", i), fmt.Appendf(nil, `{"n":%d}`, i), nil); err != nil {
			t.Fatal(err)
		}
	}
}
