package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// A listing whose bucket is deleted under it is answered 503, as every
// path answers for a closed bucket, not as a storage failure (507) or an
// internal error: with either store, whatever the closed store says (a
// closed bbolt file: "database not open"). An open bucket's listing error is
// left as it is.
func TestListingOfBucketClosedUnderIt(t *testing.T) {
	ctx := context.Background()
	for _, storage := range []string{engine.StoragePebble, engine.StorageBolt} {
		t.Run(storage, func(t *testing.T) {
			eng, err := engine.Open(t.TempDir(), &engine.Options{NumPartitions: 4, NoSync: true, Storage: storage})
			if err != nil {
				t.Fatal(err)
			}
			defer eng.Close()
			b, err := eng.CreateBucket(ctx, engine.DefaultBucketSettings("b"))
			if err != nil {
				t.Fatal(err)
			}
			c := b.DefaultCollection()
			for i := range 600 { // more than the listing's first chunk of keys
				if _, err := c.Upsert(ctx, fmt.Sprintf("k%03d", i), []byte(`{}`), nil); err != nil {
					t.Fatal(err)
				}
			}
			s := &server{eng: eng}
			if err := s.closedUnder(b, engine.ErrStorage); err != engine.ErrStorage {
				t.Fatalf("an open bucket's error became %v", err)
			}
			n := 0
			var listErr error
			for _, err := range c.List(ctx, engine.ListOptions{}) {
				if err != nil {
					listErr = err
					break
				}
				if n++; n == 10 {
					if err := eng.DeleteBucket(ctx, "b"); err != nil {
						t.Fatal(err)
					}
				}
			}
			if listErr == nil {
				t.Fatalf("the listing of a deleted bucket went on to the end (%d documents)", n)
			}
			he := classify(s.closedUnder(b, listErr))
			if he.status != http.StatusServiceUnavailable || he.code != "unavailable" {
				t.Fatalf("%v answered %d %s (%s), want 503 unavailable", listErr, he.status, he.code, he.reason)
			}
		})
	}
}
