package sdktest

import (
	"slices"
	"testing"
	"time"

	"github.com/couchbase/gocb/v2"
	"github.com/couchbase/gocb/v2/search"
)

// A scope's search index, made with the scope's index manager and queried
// with Scope.Search, as gocb does against Couchbase 7.6 (the scoped REST
// paths). gocb takes these only from a cluster whose configuration lists
// the "scopedSearchIndex" search capability; without it both calls fail
// with ErrFeatureNotAvailable.
func TestScopedSearch(t *testing.T) {
	s := start(t)
	cl, _ := s.connect(t, adminUser, adminPassword)
	b := cl.Bucket(bucketName)
	if err := b.WaitUntilReady(time.Minute, &gocb.WaitUntilReadyOptions{ServiceTypes: []gocb.ServiceType{gocb.ServiceTypeSearch, gocb.ServiceTypeKeyValue}}); err != nil {
		t.Fatal(err)
	}
	scope := b.DefaultScope()
	err := scope.SearchIndexes().UpsertIndex(gocb.SearchIndex{
		Name: "inns", Type: "fulltext-index", SourceType: "couchbase", SourceName: bucketName,
		Params: map[string]any{"mapping": map[string]any{"default_mapping": map[string]any{"enabled": true, "dynamic": true}}},
	}, nil)
	if err != nil {
		t.Fatalf("a scope's UpsertIndex: %v", err)
	}
	var tokens []gocb.MutationToken
	for id, h := range map[string]hotel{
		"s1": {Name: "Quay Inn", Stars: 3},
		"s2": {Name: "Old Quay Hotel", Stars: 4},
		"s3": {Name: "Forest Lodge", Stars: 2},
	} {
		res, err := b.DefaultCollection().Upsert(id, h, nil)
		if err != nil {
			t.Fatal(err)
		}
		if mt := res.MutationToken(); mt != nil {
			tokens = append(tokens, *mt)
		}
	}
	opts := &gocb.SearchOptions{Timeout: 30 * time.Second}
	if len(tokens) > 0 {
		opts.ConsistentWith = gocb.NewMutationState(tokens...)
	}
	res, err := scope.Search("inns", gocb.SearchRequest{SearchQuery: search.NewMatchQuery("quay").Field("name")}, opts)
	if err != nil {
		t.Fatalf("Scope.Search: %v", err)
	}
	var ids []string
	for res.Next() {
		ids = append(ids, res.Row().ID)
	}
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(ids)
	if !slices.Equal(ids, []string{"s1", "s2"}) {
		t.Fatalf("Scope.Search hits %v, want [s1 s2]", ids)
	}
}
