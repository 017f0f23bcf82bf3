package sdktest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/couchbase/gocb/v2"
)

// A new key of 247 to 250 bytes in a named (non-default) collection is
// refused with EINVAL (gocb's ErrInvalidArgument), as Couchbase limits a
// key outside the default collection to 246 bytes (kv_engine's
// MaxCollectionsLogicalKeyLen; the default collection keeps 250). A review
// found such keys stored: an application tested on Mayfly wrote keys
// Couchbase refuses, and a bucket's data copied to Couchbase lost them.
func TestNamedCollectionKeyLimit(t *testing.T) {
	s := start(t)
	ctx := context.Background()
	cl, _ := s.connect(t, user, password)
	b, err := s.eng.Bucket(bucketName)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.CreateScope(ctx, "inventory"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateCollection(ctx, "inventory", "rooms", 0); err != nil {
		t.Fatal(err)
	}
	rooms := cl.Bucket(bucketName).Scope("inventory").Collection("rooms")
	opts := &gocb.UpsertOptions{Timeout: 30 * time.Second}
	if _, err := rooms.Upsert(strings.Repeat("k", 246), 1, opts); err != nil {
		t.Fatalf("246-byte key in a named collection: %v", err)
	}
	for _, n := range []int{247, 250} {
		if _, err := rooms.Upsert(strings.Repeat("k", n), 1, opts); !errors.Is(err, gocb.ErrInvalidArgument) {
			t.Errorf("%d-byte key in a named collection: %v, want ErrInvalidArgument (Couchbase's limit there is 246)", n, err)
		}
	}
}
