package search

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mayflydb/mayfly/engine"
)

// The functions of this file give the HTTP layer Couchbase's REST answers
// (the FTS service's /api/index...) as JSON bytes, so that it needs neither
// this package's types nor bleve. Where a bucket is "", the index's bucket
// is found by name (Couchbase's index names are unique in a cluster, and
// its /api/index/{name} names no bucket); for PutIndexJSON it is the
// definition's sourceName.

func (s *Service) resolve(bucket, name string) (string, error) {
	if bucket != "" {
		return bucket, nil
	}
	return s.FindIndex(name)
}

// PutIndexJSON stores a definition (see PutIndex) and answers
// {"status":"ok","name":..,"uuid":..}.
func (s *Service) PutIndexJSON(ctx context.Context, bucket, name string, def []byte) ([]byte, error) {
	if bucket == "" {
		var d struct {
			Type       string `json:"type"`
			SourceName string `json:"sourceName"`
			Params     struct {
				Targets map[string]json.RawMessage `json:"targets"`
			} `json:"params"`
		}
		if err := json.Unmarshal(def, &d); err != nil {
			return nil, &DefError{Reason: "the index definition is not a JSON object", Err: err}
		}
		if d.SourceName == "" && d.Type == AliasType {
			// An alias lives in the bucket of its targets.
			for _, t := range sortedKeys(d.Params.Targets) {
				if b, err := s.FindIndex(t); err == nil {
					d.SourceName = b
					break
				}
			}
			if d.SourceName == "" {
				return nil, defErr("no target of the alias is an index")
			}
		}
		if d.SourceName == "" {
			return nil, defErr("sourceName (the bucket) is required")
		}
		bucket = d.SourceName
	}
	d, err := s.PutIndex(ctx, bucket, name, def)
	if err != nil {
		return nil, err
	}
	return json.Marshal(map[string]any{"status": "ok", "name": d.Name, "uuid": d.UUID})
}

// GetIndexJSON answers {"status":"ok","indexDef":{...}}.
func (s *Service) GetIndexJSON(ctx context.Context, bucket, name string) ([]byte, error) {
	bucket, err := s.resolve(bucket, name)
	if err != nil {
		return nil, err
	}
	d, err := s.GetIndex(ctx, bucket, name)
	if err != nil {
		return nil, err
	}
	return json.Marshal(map[string]any{"status": "ok", "indexDef": d.Body})
}

// ListIndexesJSON answers, for one bucket or ("") every one,
// {"status":"ok","indexDefs":{"indexDefs":{name: def, ...}}}.
func (s *Service) ListIndexesJSON(ctx context.Context, bucket string) ([]byte, error) {
	defs := map[string]json.RawMessage{}
	var buckets []string
	if bucket != "" {
		buckets = []string{bucket}
	} else {
		for _, b := range s.eng.Buckets() {
			if b.Settings().Type != engine.Memcached {
				buckets = append(buckets, b.Name())
			}
		}
	}
	for _, b := range buckets {
		ds, err := s.ListIndexes(ctx, b)
		if err != nil {
			if bucket == "" {
				continue // deleted or not ready meanwhile
			}
			return nil, err
		}
		for _, d := range ds {
			defs[d.Name] = d.Body
		}
	}
	return json.Marshal(map[string]any{"status": "ok", "indexDefs": map[string]any{"indexDefs": defs}})
}

// DeleteIndexJSON deletes an index and answers {"status":"ok","uuid":..}.
func (s *Service) DeleteIndexJSON(ctx context.Context, bucket, name string) ([]byte, error) {
	bucket, err := s.resolve(bucket, name)
	if err != nil {
		return nil, err
	}
	var uuid string
	if d, err := s.GetIndex(ctx, bucket, name); err == nil {
		uuid = d.UUID
	}
	if err := s.DeleteIndex(ctx, bucket, name); err != nil {
		return nil, err
	}
	return json.Marshal(map[string]any{"status": "ok", "uuid": uuid})
}

// QueryJSON runs a search request (see Query).
func (s *Service) QueryJSON(ctx context.Context, bucket, name string, req []byte) ([]byte, error) {
	bucket, err := s.resolve(bucket, name)
	if err != nil {
		return nil, err
	}
	return s.Query(ctx, bucket, name, req)
}

// CountJSON answers {"status":"ok","count":N}: the live documents of the
// index.
func (s *Service) CountJSON(ctx context.Context, bucket, name string) ([]byte, error) {
	bucket, err := s.resolve(bucket, name)
	if err != nil {
		return nil, err
	}
	n, err := s.Count(ctx, bucket, name)
	if err != nil {
		return nil, err
	}
	return json.Marshal(map[string]any{"status": "ok", "count": n})
}

// StatsJSON answers an index's stats as Couchbase's /api/stats/index/{name}
// does, one flat object with keys "bucket:index:stat" (doc_count,
// num_mutations_to_index, num_bytes_used_disk, total_queries,
// total_queries_error, ...), plus Mayfly's own.
func (s *Service) StatsJSON(ctx context.Context, bucket, name string) ([]byte, error) {
	bucket, err := s.resolve(bucket, name)
	if err != nil {
		return nil, err
	}
	st, err := s.IndexStats(ctx, bucket, name)
	if err != nil {
		return nil, err
	}
	p := fmt.Sprintf("%s:%s:", bucket, name)
	return json.Marshal(map[string]any{
		p + "doc_count":              st.DocCount,
		p + "num_mutations_to_index": st.SeqsBehind,
		p + "num_bytes_used_disk":    st.DiskBytes,
		p + "total_queries":          st.Queries,
		p + "total_queries_error":    st.QueryErrors,
		p + "docs_indexed":           st.DocsIndexed,
		p + "docs_deleted":           st.DocsDeleted,
		p + "batches":                st.Batches,
		p + "index_errors":           st.IndexErrors,
		p + "rollbacks":              st.Rollbacks,
	})
}

// IndexStatNames are the names BucketIndexStats gives each index's
// figures, in order: Couchbase's /api/stats/index names, then Mayfly's own.
var IndexStatNames = []string{
	"doc_count",              // live documents the index holds
	"num_mutations_to_index", // sequence numbers the index is behind the bucket
	"num_bytes_used_disk",    // size of the index's files (0 in memory)
	"total_queries",          // queries run since the index opened
	"total_queries_error",    // of which failed
	"docs_indexed",           // documents added or replaced since the index opened
	"docs_deleted",           // documents removed since the index opened
	"batches",                // batches written since the index opened
	"index_errors",           // documents bleve refused and failed batches
	"rollbacks",              // times the index was discarded and rebuilt on opening
}

// BucketIndexStats returns the figures of every index of a bucket: index
// name, then stat name (IndexStatNames), to value. A bucket without
// indexes answers an empty map.
func (s *Service) BucketIndexStats(ctx context.Context, bucket string) (map[string]map[string]int64, error) {
	sts, err := s.Stats(ctx, bucket)
	if err != nil {
		return nil, err
	}
	out := make(map[string]map[string]int64, len(sts))
	for _, st := range sts {
		out[st.Name] = map[string]int64{
			"doc_count":              int64(st.DocCount),
			"num_mutations_to_index": int64(st.SeqsBehind),
			"num_bytes_used_disk":    st.DiskBytes,
			"total_queries":          st.Queries,
			"total_queries_error":    st.QueryErrors,
			"docs_indexed":           st.DocsIndexed,
			"docs_deleted":           st.DocsDeleted,
			"batches":                st.Batches,
			"index_errors":           st.IndexErrors,
			"rollbacks":              st.Rollbacks,
		}
	}
	return out, nil
}
