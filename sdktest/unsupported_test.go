package sdktest

import (
	"errors"
	"testing"
	"time"

	"github.com/couchbase/gocb/v2"
)

// The services Mayfly does not have: the configuration lists none, so gocb
// answers ErrServiceNotAvailable at once (the README's table); a bucket
// flush is refused and the documents stay.
func TestUnsupportedServices(t *testing.T) {
	s := start(t)
	cl, coll := s.connect(t, adminUser, adminPassword)
	if _, err := coll.Upsert("stays", 1, nil); err != nil {
		t.Fatal(err)
	}
	to := 30 * time.Second // only a hang: the answer comes at once
	for name, call := range map[string]func() error{
		"N1QL query": func() error { _, err := cl.Query("SELECT 1", &gocb.QueryOptions{Timeout: to}); return err },
		"scope query": func() error {
			_, err := cl.Bucket(bucketName).Scope("_default").Query("SELECT 1", &gocb.QueryOptions{Timeout: to})
			return err
		},
		"query indexes": func() error {
			_, err := cl.QueryIndexes().GetAllIndexes(bucketName, &gocb.GetAllQueryIndexesOptions{Timeout: to})
			return err
		},
		"analytics": func() error {
			_, err := cl.AnalyticsQuery("SELECT 1", &gocb.AnalyticsOptions{Timeout: to})
			return err
		},
		"eventing": func() error {
			_, err := cl.EventingFunctions().GetAllFunctions(&gocb.GetAllEventingFunctionsOptions{Timeout: to})
			return err
		},
	} {
		if err := call(); !errors.Is(err, gocb.ErrServiceNotAvailable) {
			t.Errorf("%s: %v, want ErrServiceNotAvailable", name, err)
		}
	}
	if err := cl.Buckets().FlushBucket(bucketName, &gocb.FlushBucketOptions{Timeout: to}); err == nil {
		t.Fatal("FlushBucket succeeded")
	}
	if _, err := coll.Get("stays", nil); err != nil {
		t.Fatalf("after a refused flush: %v", err)
	}
}
