package search

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/blevesearch/bleve/v2"
)

// TestCreatedIndexOpensAfterImmediateClose: an index created on disk and
// closed at once (a staged replacement with nothing to build is moved into
// place straight away: closed, renamed, opened again) opens again with its
// mapping. Scorch keeps unsafe batches in memory until its persister runs,
// and drops them when it closes; the mapping bleve stores when it creates an
// index must not be one of them.
func TestCreatedIndexOpensAfterImmediateClose(t *testing.T) {
	d, err := ParseIndexDef("default", "i", []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	s := &Service{opts: Options{Logger: slog.New(slog.DiscardHandler)}}
	dir := t.TempDir()
	for i := range 30 {
		path := filepath.Join(dir, fmt.Sprint(i))
		idx, fresh, err := s.openIndex(d, path)
		if err != nil || !fresh {
			t.Fatalf("create %d: fresh %v, %v", i, fresh, err)
		}
		if err := idx.Close(); err != nil {
			t.Fatal(err)
		}
		idx, err = bleve.OpenUsing(path, openConfig())
		if err != nil {
			t.Fatalf("reopen %d: %v", i, err)
		}
		if err := idx.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
