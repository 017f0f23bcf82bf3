package sdktest

import (
	"errors"
	"testing"

	"github.com/couchbase/gocb/v2"
)

// gocb's view index manager: a development design document upserted, read
// back, listed, published to production and queried there, then dropped.
func TestViewIndexManager(t *testing.T) {
	s := start(t)
	cl, coll := s.connect(t, adminUser, adminPassword)
	b := cl.Bucket(bucketName)
	vi := b.ViewIndexes()
	const mapFn = `function (doc, meta) { emit(doc.name, doc.stars); }`
	err := vi.UpsertDesignDocument(gocb.DesignDocument{Name: "hotels", Views: map[string]gocb.View{
		"by_name": {Map: mapFn, Reduce: "_sum"},
	}}, gocb.DesignDocumentNamespaceDevelopment, nil)
	if err != nil {
		t.Fatal(err)
	}
	dd, err := vi.GetDesignDocument("hotels", gocb.DesignDocumentNamespaceDevelopment, nil)
	if err != nil || dd.Name != "hotels" || dd.Views["by_name"].Map != mapFn || dd.Views["by_name"].Reduce != "_sum" {
		t.Fatalf("GetDesignDocument: %+v %v", dd, err)
	}
	if _, err := vi.GetDesignDocument("hotels", gocb.DesignDocumentNamespaceProduction, nil); !errors.Is(err, gocb.ErrDesignDocumentNotFound) {
		t.Fatalf("the production copy before publishing: %v", err)
	}
	all, err := vi.GetAllDesignDocuments(gocb.DesignDocumentNamespaceDevelopment, nil)
	if err != nil || len(all) != 1 || all[0].Name != "hotels" {
		t.Fatalf("GetAllDesignDocuments: %+v %v", all, err)
	}

	if err := vi.PublishDesignDocument("hotels", nil); err != nil {
		t.Fatal(err)
	}
	if dd, err := vi.GetDesignDocument("hotels", gocb.DesignDocumentNamespaceProduction, nil); err != nil || dd.Views["by_name"].Map != mapFn {
		t.Fatalf("the published design document: %+v %v", dd, err)
	}
	for id, h := range map[string]hotel{"a": {Name: "Alpine", Stars: 4}, "b": {Name: "Bay", Stars: 3}} {
		if _, err := coll.Upsert(id, h, nil); err != nil {
			t.Fatal(err)
		}
	}
	res, err := b.ViewQuery("hotels", "by_name", &gocb.ViewOptions{ScanConsistency: gocb.ViewScanConsistencyRequestPlus, Reduce: true})
	if err != nil {
		t.Fatal(err)
	}
	var sums []float64
	for res.Next() {
		var v float64
		row := res.Row()
		if err := row.Value(&v); err != nil {
			t.Fatal(err)
		}
		sums = append(sums, v)
	}
	if err := res.Err(); err != nil || len(sums) != 1 || sums[0] != 7 {
		t.Fatalf("the published view's reduce: %v %v", sums, err)
	}

	if err := vi.DropDesignDocument("hotels", gocb.DesignDocumentNamespaceProduction, nil); err != nil {
		t.Fatal(err)
	}
	if err := vi.DropDesignDocument("hotels", gocb.DesignDocumentNamespaceProduction, nil); !errors.Is(err, gocb.ErrDesignDocumentNotFound) {
		t.Fatalf("dropping it twice: %v", err)
	}
}
