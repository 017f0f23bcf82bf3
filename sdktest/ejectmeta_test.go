package sdktest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/couchbase/gocb/v2"

	"github.com/mayflydb/mayfly/engine"
)

// ejectedBucket makes the test bucket a 1 MiB valueOnly one, writes
// documents "l0".."l49" of about 4 KB through gocb, then enough others that
// their values leave memory, and returns the bucket and the collection.
func ejectedBucket(t *testing.T, s *server) (*engine.Bucket, *gocb.Collection) {
	t.Helper()
	ctx := context.Background()
	b, err := s.eng.Bucket(bucketName)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.UpdateSettings(ctx, func(bs *engine.BucketSettings) error {
		bs.RAMQuotaMB, bs.EvictionPolicy = 1, engine.ValueOnly
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if b, err = s.eng.Bucket(bucketName); err != nil {
		t.Fatal(err)
	}
	_, coll := s.connect(t, adminUser, adminPassword)
	pad := strings.Repeat("x", 4000)
	for i := range 50 {
		if _, err := coll.Upsert(fmt.Sprint("l", i), map[string]any{"n": i, "pad": pad}, nil); err != nil {
			t.Fatal(err)
		}
	}
	// Values leave memory once persisted: sync, then write past the quota.
	for round := range 2 {
		if err := b.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		for i := range 1000 {
			if _, err := coll.Upsert(fmt.Sprint("fill", round, "-", i), map[string]any{"pad": pad}, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	if st := b.Stats(); st.NonResident < 100 {
		t.Fatalf("after writing 2,050 documents of 4 KB into 1 MiB: %d values out of memory", st.NonResident)
	}
	// The first documents' values are out: reading one reads the disk.
	before := b.Stats().BgFetched
	if _, err := coll.Get("l49", nil); err != nil {
		t.Fatal(err)
	}
	if b.Stats().BgFetched == before {
		t.Fatal("l49's value is still in memory: nothing here tests an ejected value")
	}
	return b, coll
}

// gocb's Exists (GET_META) of a live document whose value was ejected
// answers from the metadata memory keeps (deleted flag, flags, expiration,
// revision, CAS), reading no value from disk, as Couchbase's GET_META
// (VBucket::getMetaData) answers from its hash table. A review found each
// call read the value back (ep_bg_fetched grew by one a call): a disk read
// per existence check on a bucket past its quota.
func TestExistsOfEjectedDocumentReadsNoValue(t *testing.T) {
	s := start(t)
	b, coll := ejectedBucket(t, s)
	for i := range 10 {
		key := fmt.Sprint("l", i)
		before := b.Stats().BgFetched
		r, err := coll.Exists(key, nil)
		if err != nil || !r.Exists() {
			t.Fatalf("Exists(%s): %v, %v", key, r, err)
		}
		if n := b.Stats().BgFetched - before; n != 0 {
			t.Errorf("Exists(%s), value ejected: %d disk reads (ep_bg_fetched), want 0", key, n)
		}
	}
}
