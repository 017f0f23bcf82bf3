package search

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/blevesearch/bleve/v2"
	_ "github.com/blevesearch/bleve/v2/search/highlight/highlighter/ansi" // Couchbase's other highlight style
	"github.com/blevesearch/bleve/v2/search/query"

	"github.com/mayflydb/mayfly/internal/jsonstr"
)

// MaxResultWindow bounds from+size, as Couchbase's bleveMaxResultWindow does.
const MaxResultWindow = 10000

// MaxRequestDepth bounds how deep a search request's JSON nests (objects
// and arrays; a compound query's level is two: {"conjuncts":[...]}).
// bleve decodes each compound level again from its raw JSON, so a request
// nested n deep costs n² of work before its timeout applies: 4,900 levels,
// 78 KB, took 6.8 GB and 12 s. 256 leaves a hundred compound levels, far
// beyond a query a person or an SDK writes.
const MaxRequestDepth = 256

// control is the "ctl" part of a Couchbase search request.
type control struct {
	Ctl struct {
		// Timeout is in milliseconds (nil: not given).
		Timeout     *int64 `json:"timeout"`
		Consistency struct {
			Level string `json:"level"`
		} `json:"consistency"`
	} `json:"ctl"`
}

// Answer is a search answer in Couchbase's shape: bleve's SearchResult, with
// the request as the client gave it and each hit naming the index.
type Answer = bleve.SearchResult

// expiredBetween matches the documents whose expiration is in (from, to],
// 0 <= from < to (never-expiring documents have no expiration term). Its
// searcher reads only the terms of expirations in that range, so its cost
// follows the documents it finds, not the index.
func expiredBetween(from, to int64) query.Query {
	yes := true
	q := query.NewTermRangeInclusiveQuery(expTerm(from+1), expTerm(to), &yes, &yes)
	q.SetField(expField)
	return q
}

// expiredBy matches the documents expired at now: an expiration in
// (0, now].
func expiredBy(now int64) query.Query { return expiredBetween(0, now) }

// live wraps q so that it matches only documents live at now:
// bool(must: q, must_not: expired by now), a must_not clause changing no
// score. It is the filter for indexes whose mapping has synonyms (bleve
// expands synonyms only in the query types it knows, so liveQuery would
// hide q from it); others use liveQuery, which costs less.
func live(q query.Query, now int64) query.Query {
	return query.NewBooleanQuery([]query.Query{q}, nil, []query.Query{expiredBy(now)})
}

// DefaultQueryTimeout bounds a search whose request gives no ctl.timeout
// (the default Options.QueryTimeout), as cbgt's
// QUERY_CTL_DEFAULT_TIMEOUT_MS does: 10 seconds.
const DefaultQueryTimeout = 10 * time.Second

// ParseRequest parses a search request: bleve's SearchRequest JSON (query,
// size, from, fields, highlight, facets, sort, explain, includeLocations,
// search_after, search_before, score) and Couchbase's ctl (timeout in
// milliseconds, 0 for none, DefaultQueryTimeout when not given; consistency
// level "at_plus" or "not_bounded"). It returns the request, its timeout
// (0: none) and whether it asks for at_plus. Errors are *QueryError.
func ParseRequest(req []byte) (*bleve.SearchRequest, time.Duration, bool, error) {
	return parseRequest(req, DefaultQueryTimeout)
}

// parseRequest is ParseRequest with def the timeout of a request that
// gives none.
func parseRequest(req []byte, def time.Duration) (*bleve.SearchRequest, time.Duration, bool, error) {
	if len(req) > 2*MaxRequestDepth && jsonstr.DepthOver(req, MaxRequestDepth) >= 0 {
		return nil, 0, false, queryErr(nil, "the request nests deeper than %d levels", MaxRequestDepth)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(req, &top); err != nil || top == nil {
		return nil, 0, false, queryErr(err, "the request is not a JSON object")
	}
	if q, ok := top["query"]; !ok || string(q) == "null" {
		return nil, 0, false, queryErr(nil, "the request has no query")
	}
	if k, ok := top["knn"]; ok && string(k) != "null" {
		// bleve without its vectors build drops it: the answer would be the
		// query's alone, as if it were the nearest neighbours.
		return nil, 0, false, queryErr(nil, "knn (vector search) is not supported")
	}
	// bleve replaces a negative size by 10 and a negative from by 0: the
	// client would get another page than the one it asked for.
	for _, field := range []string{"size", "from"} {
		var n int64
		if raw, ok := top[field]; ok && json.Unmarshal(raw, &n) == nil && n < 0 {
			return nil, 0, false, queryErr(nil, "%s %d is negative", field, n)
		}
	}
	sr, err := unmarshalRequest(req)
	if err != nil {
		return nil, 0, false, queryErr(err, "the request does not parse: %v", err)
	}
	if sr.Query == nil {
		return nil, 0, false, queryErr(nil, "the request has no query")
	}
	if h := sr.Highlight; h != nil && h.Style != nil && *h.Style == "" {
		// The SDKs' default style (gocb sends "" for its
		// DefaultHighlightStyle): bleve's default highlighter, html,
		// rather than bleve's "no highlighter named ''".
		h.Style = nil
	}
	var c control
	if err := json.Unmarshal(req, &c); err != nil {
		return nil, 0, false, queryErr(err, "ctl does not parse: %v", err)
	}
	// Each first: their sum may overflow, wrap negative and pass.
	if sr.From > MaxResultWindow || sr.Size > MaxResultWindow || sr.From+sr.Size > MaxResultWindow {
		return nil, 0, false, queryErr(nil, "from+size is over the limit of %d (from %d, size %d)", MaxResultWindow, sr.From, sr.Size)
	}
	// bleve slices a facet's results to its size, and panics on a
	// negative one (in a goroutine of its own, for an alias of several
	// indexes: the process dies); it dereferences a null facet.
	for _, name := range sortedKeys(sr.Facets) {
		switch f := sr.Facets[name]; {
		case f == nil:
			return nil, 0, false, queryErr(nil, "facet %q is null", name)
		case f.Size < 0:
			return nil, 0, false, queryErr(nil, "facet %q: size %d is negative", name, f.Size)
		}
	}
	if err := sr.Validate(); err != nil {
		return nil, 0, false, queryErr(err, "%v", err)
	}
	timeout := def
	if t := c.Ctl.Timeout; t != nil {
		if *t < 0 {
			return nil, 0, false, queryErr(nil, "ctl.timeout %d is negative", *t)
		}
		timeout = time.Duration(min(*t, int64(math.MaxInt64/time.Millisecond))) * time.Millisecond
	}
	var atPlus bool
	switch c.Ctl.Consistency.Level {
	case "", "not_bounded":
	case "at_plus":
		atPlus = true
	default:
		return nil, 0, false, queryErr(nil, "ctl.consistency.level %q is not \"at_plus\" or \"not_bounded\"", c.Ctl.Consistency.Level)
	}
	return &sr, timeout, atPlus, nil
}

// unmarshalRequest decodes bleve's SearchRequest JSON. bleve's GeoJSON
// parser indexes a shape's coordinates without checking how many there are
// (a point of [], an envelope of one corner, a polygon ring of [[0]]), and
// panics: such a request is an error here, not a dropped connection.
func unmarshalRequest(req []byte) (sr bleve.SearchRequest, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%v (a geometry's coordinates are incomplete?)", p)
		}
	}()
	err = json.Unmarshal(req, &sr)
	return sr, err
}

// Query runs a search request (see ParseRequest) on an index and returns
// the answer's JSON in Couchbase's shape:
//
//	{"status": {"total": 1, "failed": 0, "successful": 1}, "request": {...},
//	 "hits": [{"index", "id", "score", "locations", "fragments", "fields", "sort"}],
//	 "total_hits": N, "max_score": x, "took": ns, "facets": {...}}
//
// Documents expired at the engine clock's now are left out of hits,
// total_hits and facets, purged or not. With at_plus consistency, the index
// first catches up with every write acknowledged before the query.
func (s *Service) Query(ctx context.Context, bucket, index string, req []byte) ([]byte, error) {
	res, err := s.Search(ctx, bucket, index, req)
	if err != nil {
		return nil, err
	}
	out, err := json.Marshal(res)
	if err != nil {
		return nil, fmt.Errorf("search: encode the answer: %w", err)
	}
	return out, nil
}

// maxReplacedRetries bounds how many times a search runs again on the
// indexes that replaced those it used (see Search).
const maxReplacedRetries = 16

// Search is Query returning the answer unencoded.
//
// An index replaced (its definition changed), or closed, while a search
// runs on it does not fail the search: it runs again, with the same request
// and consistency, on the index of that name at the time (an at_plus search
// waiting for the new index to catch up), so that every answer is one
// index's, whole; an index deleted meanwhile is not found. After
// maxReplacedRetries replacements within one search it gives up with an
// error wrapping ErrClosed. ctl.timeout bounds the whole search, an at_plus
// wait included (Options.QueryTimeout when the request gives none; 0:
// none); a search that passes it fails with an error wrapping
// context.DeadlineExceeded.
func (s *Service) Search(ctx context.Context, bucket, index string, req []byte) (*Answer, error) {
	sr, timeout, atPlus, perr := parseRequest(req, s.opts.QueryTimeout)
	if perr != nil {
		// A missing index is the answer before a bad request.
		ix, err := s.indexerFor(bucket, index)
		if errors.Is(err, ErrNotFound) && s.aliasFor(bucket, index) != nil {
			return nil, perr
		}
		if err != nil {
			return nil, err
		}
		ix.queries.Add(1)
		ix.qerrors.Add(1)
		return nil, perr
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	return retryReplaced(ctx, &s.replacedRetries, func() (*Answer, []*indexer, error) {
		ix, err := s.indexerFor(bucket, index)
		if errors.Is(err, ErrNotFound) {
			if a := s.aliasFor(bucket, index); a != nil {
				return s.searchAlias(ctx, bucket, a, sr, atPlus)
			}
		}
		if err != nil {
			return nil, nil, err
		}
		res, err := ix.search(ctx, sr, atPlus)
		return res, []*indexer{ix}, err
	})
}

// retryReplaced calls run until it succeeds or fails for another reason
// than an index it used (the indexers it returns) closing under it,
// maxReplacedRetries times at most and while ctx lives; run finds the
// indexes by name each time. retries counts the runs again.
func retryReplaced[T any](ctx context.Context, retries *atomic.Int64, run func() (T, []*indexer, error)) (T, error) {
	for tries := 0; ; tries++ {
		res, used, err := run()
		if err == nil || tries == maxReplacedRetries || ctx.Err() != nil || !errors.Is(err, ErrClosed) ||
			!slices.ContainsFunc(used, (*indexer).isGone) {
			return res, err
		}
		retries.Add(1)
	}
}

func (ix *indexer) search(ctx context.Context, sr *bleve.SearchRequest, atPlus bool) (*Answer, error) {
	ix.queries.Add(1)
	res, err := ix.searchErr(ctx, sr, atPlus)
	if err != nil {
		ix.qerrors.Add(1)
	}
	return res, err
}

func (ix *indexer) searchErr(ctx context.Context, sr *bleve.SearchRequest, atPlus bool) (*Answer, error) {
	if atPlus {
		if err := ix.catchUp(ctx); err != nil {
			return nil, err
		}
	}
	res, err := ix.runLive(ctx, sr, ix.bucket.Clock().Now())
	if err != nil {
		return nil, err
	}
	res.Request = sr
	for _, h := range res.Hits {
		h.Index = ix.name
	}
	if math.IsNaN(res.MaxScore) || math.IsInf(res.MaxScore, 0) {
		res.MaxScore = 0
	}
	return res, nil
}

// run runs a request on the bleve index, unless the indexer is closed.
func (ix *indexer) run(ctx context.Context, sr *bleve.SearchRequest) (*bleve.SearchResult, error) {
	ix.qmu.RLock()
	defer ix.qmu.RUnlock()
	if ix.closed {
		return nil, ix.closedErr()
	}
	res, err := searchRecovering(ctx, ix.idx, sr) // a panic: a 400, not a dropped connection
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("search: index %s: %w", ix.name, ctx.Err())
		}
		var qe *QueryError
		if errors.As(err, &qe) {
			return nil, err
		}
		// bleve reports bad queries (an unknown field type, a bad regexp)
		// when it builds the searchers.
		return nil, queryErr(err, "%v", err)
	}
	return res, nil
}

// runLive runs sr leaving out the documents expired at now (see
// expiry.go).
func (ix *indexer) runLive(ctx context.Context, sr *bleve.SearchRequest, now int64) (*bleve.SearchResult, error) {
	if err := ix.ensureSource(ctx); err != nil {
		return nil, err
	}
	w := *sr
	q := withBooleans(sr.Query)
	if ix.synonyms {
		w.Query = live(q, now)
	} else {
		w.Query = &liveQuery{q: q, now: now, cache: &ix.exp}
	}
	return ix.run(ctx, &w)
}

// Count returns the number of documents an index holds that are live now.
// An index replaced while it counts is counted again, as Search does.
func (s *Service) Count(ctx context.Context, bucket, index string) (uint64, error) {
	return retryReplaced(ctx, &s.replacedRetries, func() (uint64, []*indexer, error) {
		ix, err := s.indexerFor(bucket, index)
		if errors.Is(err, ErrNotFound) {
			if a := s.aliasFor(bucket, index); a != nil {
				return s.countAlias(ctx, bucket, a)
			}
		}
		if err != nil {
			return 0, nil, err
		}
		n, err := ix.count(ctx)
		return n, []*indexer{ix}, err
	})
}

func (ix *indexer) count(ctx context.Context) (uint64, error) {
	sr := bleve.NewSearchRequestOptions(query.NewMatchAllQuery(), 0, 0, false)
	res, err := ix.runLive(ctx, sr, ix.bucket.Clock().Now())
	if err != nil {
		return 0, err
	}
	return res.Total, nil
}
