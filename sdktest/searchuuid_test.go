package sdktest

import (
	"strings"
	"testing"
	"time"

	"github.com/couchbase/gocb/v2"
)

// The index manager's read-modify-write of a search index: UpsertIndex of
// the definition GetIndex returned replaces the index; UpsertIndex of one
// read before another change (its uuid replaced since) is refused with
// cbft's reason (gocb 2.11 raises it as a generic error; gocbcore's newer
// decoder and other SDKs read it as IndexExists), and leaves the other
// change in place.
func TestSearchIndexUpsertChecksUUID(t *testing.T) {
	s := start(t)
	cl, _ := s.connect(t, adminUser, adminPassword)
	if err := cl.WaitUntilReady(time.Minute, &gocb.WaitUntilReadyOptions{ServiceTypes: []gocb.ServiceType{gocb.ServiceTypeSearch}}); err != nil {
		t.Fatal(err)
	}
	mgr := cl.SearchIndexes()
	if err := mgr.UpsertIndex(gocb.SearchIndex{Name: "hotels", Type: "fulltext-index", SourceType: "couchbase", SourceName: bucketName}, nil); err != nil {
		t.Fatal(err)
	}
	read, err := mgr.GetIndex("hotels", nil)
	if err != nil || read.UUID == "" {
		t.Fatalf("GetIndex: %+v %v", read, err)
	}
	mine := *read
	mine.Params = map[string]any{"mapping": map[string]any{"default_analyzer": "en"}}
	if err := mgr.UpsertIndex(mine, nil); err != nil {
		t.Fatalf("UpsertIndex of the definition read: %v", err)
	}
	stale := *read
	stale.Params = map[string]any{"mapping": map[string]any{"default_analyzer": "simple"}}
	if err := mgr.UpsertIndex(stale, nil); err == nil || !strings.Contains(strings.ToLower(err.Error()), "did not match input uuid") {
		t.Errorf("UpsertIndex of a definition replaced since: %v, want cbft's refusal (current index uuid did not match input uuid)", err)
	}
	now, err := mgr.GetIndex("hotels", nil)
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := now.Params["mapping"].(map[string]any); m["default_analyzer"] != "en" {
		t.Errorf("after the refused upsert the mapping is %v, want the one upserted first (en)", now.Params["mapping"])
	}
}
