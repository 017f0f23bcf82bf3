package sdktest

import (
	"errors"
	"sort"
	"testing"
	"time"

	"github.com/couchbase/gocb/v2"
	"github.com/couchbase/gocb/v2/search"

	"github.com/mayflydb/mayfly/engine"
)

// gocb's bucket manager: get one and all buckets' settings (NumReplicas:
// replicaNumber, 1 by default on one node, as Couchbase's), create, update
// and drop a bucket, and the errors of a name taken and a missing bucket.
func TestBucketManager(t *testing.T) {
	s := start(t)
	cl, _ := s.connect(t, adminUser, adminPassword)
	bm := cl.Buckets()

	got, err := bm.GetBucket(bucketName, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != bucketName || got.BucketType != gocb.CouchbaseBucketType || got.EvictionPolicy != gocb.EvictionPolicyTypeValueOnly ||
		got.RAMQuotaMB == 0 || got.MaxExpiry != 0 || got.NumReplicas != 1 || got.FlushEnabled {
		t.Fatalf("GetBucket: %+v", got)
	}

	err = bm.CreateBucket(gocb.CreateBucketSettings{BucketSettings: gocb.BucketSettings{
		Name: "sessions", BucketType: gocb.EphemeralBucketType, RAMQuotaMB: 128,
		MaxExpiry: time.Hour, EvictionPolicy: gocb.EvictionPolicyTypeNotRecentlyUsed,
		MinimumDurabilityLevel: gocb.DurabilityLevelMajority, NumReplicas: 2,
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err = bm.GetBucket("sessions", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.BucketType != gocb.EphemeralBucketType || got.RAMQuotaMB != 128 || got.MaxExpiry != time.Hour ||
		got.EvictionPolicy != gocb.EvictionPolicyTypeNotRecentlyUsed || got.MinimumDurabilityLevel != gocb.DurabilityLevelMajority ||
		got.NumReplicas != 2 {
		t.Fatalf("created bucket: %+v", got)
	}
	err = bm.CreateBucket(gocb.CreateBucketSettings{BucketSettings: gocb.BucketSettings{Name: "sessions", BucketType: gocb.CouchbaseBucketType, RAMQuotaMB: 100}}, nil)
	if !errors.Is(err, gocb.ErrBucketExists) {
		t.Fatalf("create over an existing bucket: %v", err)
	}

	got.MaxExpiry, got.RAMQuotaMB = 2*time.Hour, 256
	if err := bm.UpdateBucket(*got, nil); err != nil {
		t.Fatal(err)
	}
	all, err := bm.GetAllBuckets(nil)
	if err != nil {
		t.Fatal(err)
	}
	// The bucket settings name Mayfly's store where Couchbase's name
	// couchstore or magma; an ephemeral bucket has none.
	if sb := all[bucketName].StorageBackend; sb != engine.StoragePebble {
		t.Errorf("%s storage backend %q, want %q", bucketName, sb, engine.StoragePebble)
	}
	if sb := all["sessions"].StorageBackend; sb != "" {
		t.Errorf("ephemeral bucket's storage backend %q, want none", sb)
	}
	var names []string
	for n := range all {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) != 2 || names[0] != "sessions" || names[1] != bucketName ||
		all["sessions"].MaxExpiry != 2*time.Hour || all["sessions"].RAMQuotaMB != 256 || all["sessions"].NumReplicas != 2 {
		t.Fatalf("GetAllBuckets after the update: %v %+v", names, all["sessions"])
	}

	if err := bm.DropBucket("sessions", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := bm.GetBucket("sessions", nil); !errors.Is(err, gocb.ErrBucketNotFound) {
		t.Fatalf("GetBucket of a dropped bucket: %v", err)
	}
	if err := bm.DropBucket("sessions", nil); !errors.Is(err, gocb.ErrBucketNotFound) {
		t.Fatalf("DropBucket of a dropped bucket: %v", err)
	}
}

// A search index made through gocb's search index manager, queried with
// SearchQuery on the search port, consistent with the documents written.
func TestSearchQuery(t *testing.T) {
	s := start(t)
	cl, _ := s.connect(t, adminUser, adminPassword)
	coll := cl.Bucket(bucketName).DefaultCollection()
	// WaitUntilReady pings the search port (GET /api/ping).
	if err := cl.WaitUntilReady(time.Minute, &gocb.WaitUntilReadyOptions{ServiceTypes: []gocb.ServiceType{gocb.ServiceTypeSearch}}); err != nil {
		t.Fatal(err)
	}

	err := cl.SearchIndexes().UpsertIndex(gocb.SearchIndex{
		Name: "hotels", Type: "fulltext-index", SourceType: "couchbase", SourceName: bucketName,
		Params: map[string]any{"mapping": map[string]any{"default_mapping": map[string]any{"enabled": true, "dynamic": true}}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := cl.SearchIndexes().GetIndex("hotels", nil)
	if err != nil || idx.Name != "hotels" || idx.SourceName != bucketName {
		t.Fatalf("GetIndex: %+v %v", idx, err)
	}

	var tokens []gocb.MutationToken
	for id, h := range map[string]hotel{
		"h1": {Name: "Grand Harbour Hotel", Stars: 5},
		"h2": {Name: "Harbour Inn", Stars: 3},
		"h3": {Name: "Mountain Lodge", Stars: 4},
	} {
		res, err := coll.Upsert(id, h, nil)
		if err != nil {
			t.Fatal(err)
		}
		if mt := res.MutationToken(); mt != nil {
			tokens = append(tokens, *mt)
		}
	}
	opts := &gocb.SearchOptions{Fields: []string{"name"}}
	if len(tokens) > 0 {
		opts.ConsistentWith = gocb.NewMutationState(tokens...)
	}
	res, err := cl.SearchQuery("hotels", search.NewMatchQuery("harbour").Field("name"), opts)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for res.Next() {
		row := res.Row()
		ids = append(ids, row.ID)
		var fields struct {
			Name string `json:"name"`
		}
		if err := row.Fields(&fields); err != nil || fields.Name == "" {
			t.Fatalf("row %s fields: %+v %v", row.ID, fields, err)
		}
	}
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	sort.Strings(ids)
	if len(ids) != 2 || ids[0] != "h1" || ids[1] != "h2" {
		t.Fatalf("hits %v, want h1 h2", ids)
	}
	meta, err := res.MetaData()
	if err != nil || meta.Metrics.TotalRows != 2 {
		t.Fatalf("metadata %+v %v", meta, err)
	}

	// A query on an index that does not exist: a gocb SearchError that is
	// ErrIndexNotFound, as against cbft (see also TestSearchIndexNotFound).
	_, err = cl.SearchQuery("nosuch", search.NewMatchQuery("harbour"), nil)
	var se *gocb.SearchError
	if !errors.As(err, &se) || !errors.Is(err, gocb.ErrIndexNotFound) || se.IndexName != "nosuch" {
		t.Fatalf("query of a missing index: %v", err)
	}
	if err := cl.SearchIndexes().DropIndex("hotels", nil); err != nil {
		t.Fatal(err)
	}
}
