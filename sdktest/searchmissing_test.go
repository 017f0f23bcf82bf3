package sdktest

import (
	"errors"
	"testing"
	"time"

	"github.com/couchbase/gocb/v2"
	"github.com/couchbase/gocb/v2/search"
)

// A search on an index that does not exist, and the index manager's calls
// on one, raise gocb's ErrIndexNotFound, as against cbft.
func TestSearchIndexNotFound(t *testing.T) {
	s := start(t)
	cl, _ := s.connect(t, adminUser, adminPassword)
	if err := cl.WaitUntilReady(time.Minute, &gocb.WaitUntilReadyOptions{ServiceTypes: []gocb.ServiceType{gocb.ServiceTypeSearch}}); err != nil {
		t.Fatal(err)
	}
	_, err := cl.SearchQuery("nosuch", search.NewMatchQuery("x"), &gocb.SearchOptions{Timeout: 30 * time.Second})
	if !errors.Is(err, gocb.ErrIndexNotFound) {
		t.Fatalf("query on a missing index: %v, want ErrIndexNotFound", err)
	}
	if _, err := cl.SearchIndexes().GetIndex("nosuch", nil); !errors.Is(err, gocb.ErrIndexNotFound) {
		t.Fatalf("GetIndex of a missing index: %v, want ErrIndexNotFound", err)
	}
	if err := cl.SearchIndexes().DropIndex("nosuch", nil); !errors.Is(err, gocb.ErrIndexNotFound) {
		t.Fatalf("DropIndex of a missing index: %v, want ErrIndexNotFound", err)
	}
}
