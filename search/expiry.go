package search

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"weak"

	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/mapping"
	"github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/query"
	"github.com/blevesearch/bleve/v2/search/searcher"
	index "github.com/blevesearch/bleve_index_api"
)

// The expiry filter.
//
// Every query runs as liveQuery{q, now}: its searcher is q's, with the
// documents expired at now taken out of the stream of matches before the
// collector sees them, so hits, total_hits, facets and sorting never
// count them, and scores do not change. The documents expired at now are
// found on the very index snapshot the query reads (the postings of the
// _mayfly_exp values in (0, now], see collectExpired) and kept as a set of
// internal document numbers, cached per snapshot: a snapshot never
// changes, so the set is computed once per snapshot and per second (and
// only extended when the second advances on the same snapshot), and a
// query's filter costs one bit test per match. When the set is empty
// (nothing expired waits for the pager) the query's own searcher runs
// unwrapped.

// liveQuery matches the documents of q that are not expired at now.
type liveQuery struct {
	q     query.Query
	now   int64
	cache *expiredCache
}

// Searcher is q's searcher without the documents expired at now.
func (lq *liveQuery) Searcher(ctx context.Context, i index.IndexReader, m mapping.IndexMapping, options search.SearcherOptions) (search.Searcher, error) {
	exp, err := lq.cache.expired(ctx, i, lq.now)
	if err != nil {
		return nil, err
	}
	s, err := lq.q.Searcher(ctx, i, m, options)
	if err != nil || exp.empty() {
		return s, err
	}
	return searcher.NewFilteringSearcher(ctx, s, func(_ *search.SearchContext, d *search.DocumentMatch) bool {
		return !exp.has(d.IndexInternalID)
	}), nil
}

// docSet is a set of internal document numbers: scorch's are 8-byte
// big-endian numbers, kept in a bitmap; any other shape in a map.
type docSet struct {
	bits  []uint64
	other map[string]struct{}
	n     int
}

func (s *docSet) empty() bool { return s == nil || s.n == 0 }

func (s *docSet) has(id index.IndexInternalID) bool {
	if len(id) == 8 {
		v := binary.BigEndian.Uint64(id)
		w := v >> 6
		return w < uint64(len(s.bits)) && s.bits[w]&(1<<(v&63)) != 0
	}
	_, ok := s.other[string(id)]
	return ok
}

func (s *docSet) add(id index.IndexInternalID) {
	if s.has(id) {
		return
	}
	s.n++
	if len(id) == 8 {
		v := binary.BigEndian.Uint64(id)
		w := int(v >> 6)
		if w >= len(s.bits) {
			s.bits = append(s.bits, make([]uint64, w+1-len(s.bits))...)
		}
		s.bits[w] |= 1 << (v & 63)
		return
	}
	if s.other == nil {
		s.other = map[string]struct{}{}
	}
	s.other[string(id)] = struct{}{}
}

func (s *docSet) clone() *docSet {
	c := &docSet{bits: append([]uint64(nil), s.bits...), n: s.n}
	if s.other != nil {
		c.other = make(map[string]struct{}, len(s.other))
		for k := range s.other {
			c.other[k] = struct{}{}
		}
	}
	return c
}

// expiredCache holds the sets of documents expired at a second of the
// last few index snapshots queries asked for (an alias's queries read a
// snapshot of each target).
type expiredCache struct {
	mu      sync.Mutex
	entries [expiredCacheSize]expiredEntry
	next    int // the entry to replace next
}

const expiredCacheSize = 8

type expiredEntry struct {
	snap weak.Pointer[scorch.IndexSnapshot] // zero: none
	now  int64
	set  *docSet // never changed once stored
}

// expired returns the documents of the snapshot i expired at now
// (0 < expiration <= now).
func (c *expiredCache) expired(ctx context.Context, i index.IndexReader, now int64) (*docSet, error) {
	snap, ok := i.(*scorch.IndexSnapshot)
	if !ok { // not scorch: no snapshot identity to cache by
		return collectExpired(ctx, i, 0, now, nil)
	}
	wp := weak.Make(snap)
	var e expiredEntry
	c.mu.Lock()
	for _, ce := range c.entries {
		if ce.snap == wp && ce.set != nil {
			e = ce
			break
		}
	}
	c.mu.Unlock()
	var from int64
	var base *docSet
	if e.set != nil {
		switch {
		case e.now == now:
			return e.set, nil
		case e.now < now:
			from, base = e.now, e.set // extend: what expired in (e.now, now]
		}
	}
	set, err := collectExpired(ctx, i, from, now, base)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, ce := range c.entries {
		if ce.snap == wp {
			if ce.now < now {
				c.entries[k] = expiredEntry{snap: wp, now: now, set: set}
			}
			return set, nil
		}
	}
	c.entries[c.next] = expiredEntry{snap: wp, now: now, set: set}
	c.next = (c.next + 1) % expiredCacheSize
	return set, nil
}

// collectExpired returns base (copied) plus the documents of i whose
// expiration is in (from, now].
// collectExpired returns base (copied) plus the documents of i whose
// expiration is in (from, now]. It reads the terms of _mayfly_exp in that
// range from the field's dictionary (they sort as the numbers do), then
// their postings: the cost follows the distinct expirations and documents
// found.
func collectExpired(ctx context.Context, i index.IndexReader, from, now int64, base *docSet) (*docSet, error) {
	set := &docSet{}
	if base != nil {
		set = base.clone()
	}
	if from < 0 {
		from = 0
	}
	if now <= from {
		return set, nil
	}
	dict, err := i.FieldDictRange(expField, []byte(expTerm(from+1)), []byte(expTerm(now)))
	if err != nil {
		return nil, fmt.Errorf("search: the expiry filter: %w", err)
	}
	var terms [][]byte
	for {
		e, err := dict.Next()
		if err != nil {
			dict.Close()
			return nil, fmt.Errorf("search: the expiry filter: %w", err)
		}
		if e == nil {
			break
		}
		terms = append(terms, []byte(e.Term))
	}
	if err := dict.Close(); err != nil {
		return nil, fmt.Errorf("search: the expiry filter: %w", err)
	}
	var td index.TermFieldDoc
	for _, term := range terms {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		r, err := i.TermFieldReader(ctx, term, expField, false, false, false)
		if err != nil {
			return nil, fmt.Errorf("search: the expiry filter: %w", err)
		}
		for {
			d, err := r.Next(td.Reset())
			if err != nil {
				r.Close()
				return nil, fmt.Errorf("search: the expiry filter: %w", err)
			}
			if d == nil {
				break
			}
			set.add(d.ID)
		}
		if err := r.Close(); err != nil {
			return nil, fmt.Errorf("search: the expiry filter: %w", err)
		}
	}
	return set, nil
}
