package sdktest

import (
	"errors"
	"testing"

	"github.com/couchbase/gocb/v2"
)

// gocb's FlushBucket: ErrBucketNotFlushable while the bucket's
// FlushEnabled is off (nothing is deleted); once UpdateBucket turns it on,
// GetBucket shows it and the flush deletes every document.
func TestFlushBucket(t *testing.T) {
	s := start(t)
	cl, coll := s.connect(t, adminUser, adminPassword)
	bm := cl.Buckets()
	if _, err := coll.Upsert("f1", hotel{"Flushed", 1}, nil); err != nil {
		t.Fatal(err)
	}
	if err := bm.FlushBucket(bucketName, nil); !errors.Is(err, gocb.ErrBucketNotFlushable) {
		t.Fatalf("flush with FlushEnabled off: %v, want ErrBucketNotFlushable", err)
	}
	if _, err := coll.Get("f1", nil); err != nil {
		t.Fatalf("a refused flush deleted a document: %v", err)
	}
	got, err := bm.GetBucket(bucketName, nil)
	if err != nil || got.FlushEnabled {
		t.Fatalf("bucket settings: %+v %v", got, err)
	}
	got.FlushEnabled = true
	if err := bm.UpdateBucket(*got, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := bm.GetBucket(bucketName, nil); err != nil || !got.FlushEnabled {
		t.Fatalf("after enabling flush: %+v %v", got, err)
	}
	if err := bm.FlushBucket(bucketName, nil); err != nil {
		t.Fatalf("flush: %v", err)
	}
	if _, err := coll.Get("f1", nil); !errors.Is(err, gocb.ErrDocumentNotFound) {
		t.Fatalf("get after the flush: %v, want ErrDocumentNotFound", err)
	}
	if err := bm.FlushBucket("nosuch", nil); !errors.Is(err, gocb.ErrBucketNotFound) {
		t.Fatalf("flush of a missing bucket: %v, want ErrBucketNotFound", err)
	}
}
