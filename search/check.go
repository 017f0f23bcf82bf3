package search

import (
	"context"
	"errors"
	"fmt"
	"sort"
)

// maxCheckProblems is how many differences Check names per index.
const maxCheckProblems = 10

// Check brings every index up to date (as at_plus does) and compares the
// documents it holds with a fresh scan of its bucket: every live JSON object
// of the index's collection must be in it, nothing else may be, and the
// documents a query counts as live (its expiry filter at the clock's now)
// must be those not expired. It is meant for a quiet engine (test cleanups,
// tools): a write made while it runs may show as a difference.
func (s *Service) Check(ctx context.Context) error {
	bis, closed := s.reg.Sets()
	if closed {
		return ErrClosed
	}
	var errs []error
	for _, bi := range bis {
		for _, ix := range bi.Members() {
			if err := ix.check(ctx); err != nil && !errors.Is(err, ErrClosed) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func (ix *indexer) check(ctx context.Context) error {
	if err := ix.catchUp(ctx); err != nil {
		return err
	}
	name := fmt.Sprintf("bucket %s, index %s", ix.bucket.Name(), ix.name)
	cur, err := ix.feed.Handle().Changes(nil)
	if err != nil {
		return fmt.Errorf("search: check %s: %w", name, err)
	}
	now := ix.bucket.Clock().Now()
	want := map[string]bool{}
	var live uint64
	for d := range cur.Next(0) {
		if d.Collection != ix.collection() || ix.docValue(d) == nil {
			continue
		}
		want[d.Key] = true
		if !d.ExpiredAt(now) {
			live++
		}
	}
	if err := cur.Err(); err != nil {
		return fmt.Errorf("search: check %s: %w", name, err)
	}
	got, err := ix.docIDs()
	if err != nil {
		return fmt.Errorf("search: check %s: %w", name, err)
	}
	var problems []string
	addf := func(format string, args ...any) {
		if len(problems) < maxCheckProblems {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	var missing, extra []string
	for id := range want {
		if !got[id] {
			missing = append(missing, id)
		}
	}
	for id := range got {
		if !want[id] {
			extra = append(extra, id)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	for _, id := range missing {
		addf("document %q is missing from the index", id)
	}
	for _, id := range extra {
		addf("document %q is in the index; the bucket has no live JSON document of that key", id)
	}
	if len(missing)+len(extra) == 0 {
		n, err := ix.count(ctx)
		if err != nil {
			return fmt.Errorf("search: check %s: %w", name, err)
		}
		if n != live {
			addf("the index counts %d documents live at %d; the bucket has %d", n, now, live)
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s: %d missing, %d extra: %v", ErrCheck, name, len(missing), len(extra), problems)
	}
	return nil
}

// docIDs lists the documents the index holds.
func (ix *indexer) docIDs() (map[string]bool, error) {
	ix.qmu.RLock()
	defer ix.qmu.RUnlock()
	if ix.closed {
		return nil, ix.closedErr()
	}
	ai, err := ix.idx.Advanced()
	if err != nil {
		return nil, err
	}
	r, err := ai.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	dr, err := r.DocIDReaderAll()
	if err != nil {
		return nil, err
	}
	defer dr.Close()
	out := map[string]bool{}
	for {
		id, err := dr.Next()
		if err != nil {
			return nil, err
		}
		if id == nil {
			return out, nil
		}
		ext, err := r.ExternalID(id)
		if err != nil {
			return nil, err
		}
		out[ext] = true
	}
}
