package search

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/search/query"
)

// putAlias stores an alias definition (checked: checkAliasTargets). Its targets must be full-text
// indexes of the same bucket (an alias of aliases, or across buckets, is
// refused). An index of the same name is replaced: closed, its files and
// feed registration removed.
func (s *Service) putAlias(ctx context.Context, bi *bucketIndexes, d *IndexDef) (*IndexDef, error) {
	unlock, err := bi.Change()
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := checkCurrentUUID(bi, d); err != nil {
		return nil, err
	}
	old, _, _ := bi.Get(d.Name)
	if err := bi.Bucket.PutSystemDoc(ctx, DefPrefix+d.Name, d.Body); err != nil {
		return nil, fmt.Errorf("search: store %s: %w", d.Name, err)
	}
	if old != nil { // an index replaced by an alias
		if err := bi.Retire(ctx, d.Name, bi.Bucket.Consumer(consumerName(d.Name)), func() error { return removeIndexFiles(bi.Bucket, d.Name) }); err != nil {
			s.opts.Logger.Warn("search: retiring an index replaced by an alias", "bucket", bi.Bucket.Name(), "index", d.Name, "err", err)
		}
	}
	bi.Remove(d.Name)
	bi.SetExtra(d.Name, d)
	return d, nil
}

// checkAliasTargets checks that each of an alias's targets is an index
// (not an alias) of its bucket.
func checkAliasTargets(bi *bucketIndexes, d *IndexDef) error {
	for _, t := range d.targets {
		body, err := bi.Bucket.SystemDoc(DefPrefix + t)
		if err != nil {
			return defErr("target %q is not an index of bucket %s", t, bi.Bucket.Name())
		}
		td, err := loadIndexDef(bi.Bucket.Name(), t, body)
		if err != nil {
			return defErr("target %q does not load: %v", t, err)
		}
		if td.IsAlias() {
			return defErr("target %q is an alias; an alias targets indexes", t)
		}
	}
	return nil
}

// aliasFor returns the alias called name in bucket, or nil.
func (s *Service) aliasFor(bucket, name string) *IndexDef {
	bi, err := s.lookup(bucket)
	if err != nil {
		return nil
	}
	a, _ := bi.Extra(name)
	return a
}

// aliasTargets returns the running indexers of an alias's targets: an error
// wrapping ErrNotFound names a target that no longer exists.
func (s *Service) aliasTargets(bucket string, a *IndexDef) ([]*indexer, error) {
	out := make([]*indexer, 0, len(a.targets))
	for _, t := range a.targets {
		ix, err := s.indexerFor(bucket, t)
		if errors.Is(err, ErrNotFound) {
			// ErrNotFound first, so that the front door's reason reads
			// "index not found" (what the SDKs match), naming the target.
			return nil, fmt.Errorf("%w: index %s, a target of alias %s, not found in bucket %s", ErrNotFound, t, a.Name, bucket)
		}
		if err != nil {
			return nil, fmt.Errorf("alias %s: target %s: %w", a.Name, t, err)
		}
		out = append(out, ix)
	}
	return out, nil
}

// searchAlias runs a search request on an alias's targets together, each
// leaving out its documents expired at now, and merges their answers (hits
// by score or sort, total_hits, facets), as bleve's index alias does.
// It returns the indexers it used, so that a search that fails because one
// was closed under it can run again (see retryReplaced).
func (s *Service) searchAlias(ctx context.Context, bucket string, a *IndexDef, sr *bleve.SearchRequest, atPlus bool) (*Answer, []*indexer, error) {
	ixs, err := s.aliasTargets(bucket, a)
	if err != nil {
		return nil, nil, err
	}
	res, err := s.searchTargets(ctx, a, ixs, sr, atPlus)
	return res, ixs, err
}

// searchTargets is searchAlias on the running indexers of a's targets.
func (s *Service) searchTargets(ctx context.Context, a *IndexDef, ixs []*indexer, sr *bleve.SearchRequest, atPlus bool) (*Answer, error) {
	for _, ix := range ixs {
		ix.queries.Add(1)
		if atPlus {
			if err := ix.catchUp(ctx); err != nil {
				return nil, err
			}
		}
		if err := ix.ensureSource(ctx); err != nil {
			return nil, err
		}
	}
	now := ixs[0].bucket.Clock().Now()
	idxs := make([]bleve.Index, 0, len(ixs))
	synonyms := false
	for _, ix := range ixs {
		ix.qmu.RLock()
		defer ix.qmu.RUnlock()
		if ix.closed {
			return nil, ix.closedErr()
		}
		idxs = append(idxs, recovering{ix.idx})
		synonyms = synonyms || ix.synonyms
	}
	w := *sr
	q := withBooleans(sr.Query)
	if synonyms {
		w.Query = live(q, now)
	} else {
		w.Query = &liveQuery{q: q, now: now, cache: &s.aliasCache}
	}
	alias := bleve.NewIndexAlias(idxs...)
	res, err := alias.SearchInContext(ctx, &w)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("search: alias %s: %w", a.Name, ctx.Err())
		}
		var qe *QueryError
		if errors.As(err, &qe) {
			return nil, err
		}
		return nil, queryErr(err, "%v", err)
	}
	res.Request = sr
	if math.IsNaN(res.MaxScore) || math.IsInf(res.MaxScore, 0) {
		res.MaxScore = 0
	}
	return res, nil
}

// countAlias counts the live documents of an alias's targets.
func (s *Service) countAlias(ctx context.Context, bucket string, a *IndexDef) (uint64, []*indexer, error) {
	sr := bleve.NewSearchRequestOptions(query.NewMatchAllQuery(), 0, 0, false)
	res, used, err := s.searchAlias(ctx, bucket, a, sr, false)
	if err != nil {
		return 0, used, err
	}
	return res.Total, used, nil
}

// recovering is one target of an alias's search whose panic becomes that
// target's error. bleve searches an alias's targets in goroutines of its
// own, where a panic (a request bleve fails to check: a negative facet
// size, incomplete coordinates, before they were refused here) nothing
// recovers would stop the process; the error makes the target count as
// failed in the answer's status, as an index that could not answer.
type recovering struct{ target }

// target is bleve.Index under another name, so that recovering embeds it
// without its field's name hiding the interface's Index method.
type target = bleve.Index

// SearchInContext runs the target's search, its panic returned as a
// QueryError.
func (r recovering) SearchInContext(ctx context.Context, req *bleve.SearchRequest) (*bleve.SearchResult, error) {
	return searchRecovering(ctx, r.target, req)
}

// searchRecovering runs req on idx, a panic in bleve returned as a
// QueryError naming the index and what bleve said.
func searchRecovering(ctx context.Context, idx bleve.Index, req *bleve.SearchRequest) (res *bleve.SearchResult, err error) {
	defer func() {
		if p := recover(); p != nil {
			res, err = nil, queryErr(fmt.Errorf("%v", p), "index %s failed on this request: %v", idx.Name(), p)
		}
	}()
	return idx.SearchInContext(ctx, req)
}

// defaultScope is the scope of an index that names no collection: it reads
// _default._default.
const defaultScope = "_default"

// IndexScope returns the scope an index reads (of its source collection;
// "_default" for one that names none), as Couchbase 7.6's scoped REST
// paths name it; for an alias, that of its targets, or "" when none of
// them exists any longer. An error wraps ErrNotFound for a missing index.
func (s *Service) IndexScope(ctx context.Context, bucket, name string) (string, error) {
	if a := s.aliasFor(bucket, name); a != nil {
		return s.aliasScope(bucket, a), nil
	}
	if ix, err := s.indexerFor(bucket, name); err == nil {
		return collectionScope(ix.def.Load().SourceCollection), nil
	}
	d, err := s.GetIndex(ctx, bucket, name) // stored, but it did not load
	if err != nil {
		return "", err
	}
	return s.defScope(bucket, d), nil
}

// DefScope returns the scope the definition def of index name in bucket
// would read (see IndexScope); a definition that does not parse is a
// *DefError.
func (s *Service) DefScope(bucket, name string, def []byte) (string, error) {
	d, err := ParseIndexDef(bucket, name, def)
	if err != nil {
		return "", err
	}
	return s.defScope(bucket, d), nil
}

func (s *Service) defScope(bucket string, d *IndexDef) string {
	if d.IsAlias() {
		return s.aliasScope(bucket, d)
	}
	return collectionScope(d.SourceCollection)
}

// aliasScope is the scope of the first of a's targets that is a running
// index, or "".
func (s *Service) aliasScope(bucket string, a *IndexDef) string {
	for _, t := range a.targets {
		if ix, err := s.indexerFor(bucket, t); err == nil {
			return collectionScope(ix.def.Load().SourceCollection)
		}
	}
	return ""
}

// collectionScope is the scope of a sourceCollection ("_default" for
// none: _default._default).
func collectionScope(coll string) string {
	if scope, _, ok := splitCollection(coll); ok {
		return scope
	}
	return defaultScope
}
