package search_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/search"
)

// TestErrors: what a caller tells apart (httpapi maps each to its status)
// is an error it can test with errors.Is and errors.As, whatever wraps it.
func TestErrors(t *testing.T) {
	e := newEnv(t, engine.Couchbase, search.Options{})
	ctx := context.Background()
	s := e.svc
	if _, err := s.PutIndex(ctx, "default", "idx", []byte(`{"type":"fulltext-index","name":"idx","sourceType":"couchbase","sourceName":"default","params":{"mapping":{}}}`)); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteIndex(ctx, "default", "idx"); err != nil {
		t.Fatal(err)
	}
	var de *search.DefError
	var qe *search.QueryError
	for _, c := range []struct {
		name string
		err  error
		is   func(error) bool
	}{
		{"get a deleted index", func() error { _, err := s.GetIndex(ctx, "default", "idx"); return err }(),
			func(err error) bool { return errors.Is(err, search.ErrNotFound) }},
		{"find a deleted index", func() error { _, err := s.FindIndex("idx"); return err }(),
			func(err error) bool { return errors.Is(err, search.ErrNotFound) }},
		{"a definition naming no bucket", func() error { _, err := s.SourceBucket([]byte(`{}`)); return err }(),
			func(err error) bool { return errors.As(err, &de) && de.Reason == "sourceName (the bucket) is required" }},
		{"a definition that is not JSON", func() error { _, err := s.SourceBucket([]byte(`[`)); return err }(),
			func(err error) bool { return errors.As(err, &de) }},
		{"an alias with no index among its targets", func() error {
			_, err := s.SourceBucket([]byte(`{"type":"fulltext-alias","params":{"targets":{"idx":{}}}}`))
			return err
		}(), func(err error) bool { return errors.As(err, &de) && de.Reason == "no target of the alias is an index" }},
		{"a bad mapping", func() error {
			_, err := s.PutIndex(ctx, "default", "x", []byte(`{"params":{"mapping":{"types":1}},"sourceName":"default"}`))
			return err
		}(), func(err error) bool { return errors.As(err, &de) }},
		{"an unknown query type", func() error {
			if _, err := s.PutIndex(ctx, "default", "y", []byte(`{}`)); err != nil {
				t.Fatal(err)
			}
			_, err := s.Query(ctx, "default", "y", []byte(`{"query":{"bad":1}}`))
			return err
		}(), func(err error) bool { return errors.As(err, &qe) }},
	} {
		if c.err == nil || !c.is(c.err) {
			t.Errorf("%s: %v (%T)", c.name, c.err, c.err)
		}
	}
	if b, err := s.SourceBucket([]byte(`{"sourceName":"nobucket"}`)); err != nil || b != "nobucket" {
		t.Fatalf("SourceBucket: %q, %v", b, err)
	}
	// A source bucket that does not exist is a refused definition (cbft
	// answers 400), with the "non existent bucket" Couchbase's SDKs read as
	// SourceNotFound, and still the engine's missing bucket.
	_, err := s.PutIndex(ctx, "nobucket", "z", []byte(`{"sourceName":"nobucket"}`))
	if !errors.Is(err, engine.ErrBucketNotFound) || !strings.Contains(err.Error(), `"nobucket": non existent bucket`) || !errors.As(err, &de) {
		t.Errorf("missing bucket: %v", err)
	}
}
