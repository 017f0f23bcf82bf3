package views

import (
	"context"
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
