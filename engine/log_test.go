package engine_test

import (
	"context"
	"testing"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/internal/logtest"
)

// Creating and deleting a bucket logs one info line each, naming it.
func TestLogBucketCreatedDeleted(t *testing.T) {
	var logs logtest.Buffer
	logger := logs.Logger()
	eng, err := engine.Open(t.TempDir(), &engine.Options{Clock: engine.NewFakeClock(t0), NoSync: true, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	defer closeChecked(t, eng)
	ctx := context.Background()
	s := engine.DefaultBucketSettings("travel")
	s.MaxTTL = 60
	if _, err := eng.CreateBucket(ctx, s); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.CreateBucket(ctx, s); err == nil {
		t.Fatal("creating the bucket twice succeeded")
	}
	created := logs.Records(t, "bucket created")
	if len(created) != 1 {
		t.Fatalf("%d \"bucket created\" lines, want 1: %s", len(created), logs.String())
	}
	if c := created[0]; c["level"] != "INFO" || c["bucket"] != "travel" || c["type"] != "couchbase" || c["max_ttl"] != float64(60) {
		t.Errorf("bucket created line = %v", c)
	}
	if err := eng.DeleteBucket(ctx, "travel"); err != nil {
		t.Fatal(err)
	}
	if err := eng.DeleteBucket(ctx, "travel"); err == nil {
		t.Fatal("deleting the bucket twice succeeded")
	}
	deleted := logs.Records(t, "bucket deleted")
	if len(deleted) != 1 || deleted[0]["bucket"] != "travel" || deleted[0]["level"] != "INFO" {
		t.Errorf("bucket deleted lines = %v", deleted)
	}
}
