package views

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/index"
	"github.com/mayflydb/mayfly/jsruntime"
)

// ErrCheck is wrapped by every error Check returns: a view index does not
// hold what its documents' map functions give.
var ErrCheck = errors.New("views: check failed")

// maxCheckProblems is how many differences Check names per design document.
const maxCheckProblems = 10

// checkRow is one expected or stored row of one document.
type checkRow struct{ key, value []byte }

// Check brings every index up to date (as stale=false does) and verifies it:
// the index's own invariants (index.Check: tree, stored reductions, back
// index, file), and each view's rows against a fresh map of the bucket's
// documents as they are now. The rows of an expired document not yet purged
// may be missing (a data directory written before expirations were durable
// brings a purged document back as expired and unpurged once, its rows
// already gone); present, they must be right. It is meant for a quiet engine (test
// cleanups, tools): a write made while it runs may show as a difference.
func (s *Service) Check(ctx context.Context) error {
	var errs []error
	for _, ix := range s.allIndexers() {
		if err := ix.check(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// check verifies one design document's index (see Service.Check).
func (ix *indexer) check(ctx context.Context) error {
	if err := ix.feed.CatchUpNow(ctx); err != nil {
		return err
	}
	d := ix.design()
	name := fmt.Sprintf("bucket %s, %s", ix.bucket.Name(), d.ID)
	if err := ix.idx.Check(ctx); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrCheck, name, err)
	}
	want, expired, err := ix.freshMap(ctx)
	if err != nil {
		return fmt.Errorf("views: check %s: %w", name, err)
	}
	var problems []string
	addf := func(format string, args ...any) {
		if len(problems) < maxCheckProblems {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	for _, view := range ix.names {
		got := map[string][]checkRow{}
		err := ix.idx.Query(ctx, view, index.Range{}, func(r index.Row) error {
			got[r.DocID] = append(got[r.DocID], checkRow{r.Key, r.Value})
			return nil
		})
		if err != nil {
			return fmt.Errorf("views: check %s: %w", name, err)
		}
		for id, rows := range got {
			w := want[view][id]
			if expired[id] && len(w) > 0 {
				// Present or missing, but right if present.
			} else if len(w) == 0 {
				addf("view %s: document %q has %d rows; its map gives none (deleted, missing or not emitting)", view, id, len(rows))
				continue
			}
			if !sameRows(rows, w) {
				addf("view %s: document %q has rows %s, its map gives %s", view, id, showRows(rows), showRows(w))
			}
		}
		for id, w := range want[view] {
			if _, ok := got[id]; !ok && len(w) > 0 && !expired[id] {
				addf("view %s: document %q misses its %d rows", view, id, len(w))
			}
		}
	}
	if len(problems) == 0 {
		return nil
	}
	msg := name
	for _, p := range problems {
		msg += "\n\t" + p
	}
	return fmt.Errorf("%w: %s", ErrCheck, msg)
}

// freshMap runs every live document of the bucket's default collection
// through the design document's map functions and returns the rows per view
// and document, and the documents that have expired by now.
func (ix *indexer) freshMap(ctx context.Context) (rows map[string]map[string][]checkRow, expired map[string]bool, err error) {
	cur, err := ix.feed.Handle().Changes(nil)
	if err != nil {
		return nil, nil, err
	}
	now := ix.bucket.Clock().Now()
	expired = map[string]bool{}
	var docs []jsruntime.Doc
	for d := range cur.Next(0) {
		if d.Collection != engine.DefaultCollectionID || d.Deleted {
			continue
		}
		if f := ix.filter.Load(); f != nil && !covers(*f, int(d.Partition)) {
			continue // a partition the index does not hold (Service.Cover)
		}
		if d.ExpiredAt(now) {
			expired[d.Key] = true
		}
		docs = append(docs, mapInput(d))
	}
	if err := cur.Err(); err != nil {
		return nil, nil, err
	}
	rows = make(map[string]map[string][]checkRow, len(ix.names))
	for _, v := range ix.names {
		rows[v] = map[string][]checkRow{}
	}
	const batch = 1000
	for start := 0; start < len(docs); start += batch {
		part := docs[start:min(start+batch, len(docs))]
		res, err := ix.prog.Map(ctx, part)
		if err != nil {
			return nil, nil, err
		}
		for i, r := range res {
			for j, vr := range r {
				if vr.Err != nil {
					continue
				}
				for _, e := range vr.Emits {
					rows[ix.names[j]][part[i].Meta.ID] = append(rows[ix.names[j]][part[i].Meta.ID], checkRow{e.Key, orNull(e.Value)})
				}
			}
		}
	}
	return rows, expired, nil
}

// mapInput is what a map function sees of a document.
func mapInput(d *engine.Document) jsruntime.Doc {
	return jsruntime.Doc{Value: d.Value, Meta: jsruntime.Meta{
		ID: d.Key, Rev: d.Rev(), Seq: d.Seq, VB: d.Partition,
		Expiration: d.Expiration, Flags: d.Flags, Type: string(d.Type),
		TS: d.TS, Created: d.CreatedAt,
	}}
}

func sortRows(rows []checkRow) []checkRow {
	rows = slices.Clone(rows)
	slices.SortFunc(rows, func(a, b checkRow) int {
		return cmp.Or(bytes.Compare(a.key, b.key), bytes.Compare(a.value, b.value))
	})
	return rows
}

func sameRows(a, b []checkRow) bool {
	return slices.EqualFunc(sortRows(a), sortRows(b), func(x, y checkRow) bool {
		return bytes.Equal(x.key, y.key) && bytes.Equal(orNull(x.value), orNull(y.value))
	})
}

func showRows(rows []checkRow) string {
	s := "["
	for i, r := range sortRows(rows) {
		if i > 0 {
			s += " "
		}
		s += string(r.key) + "=" + string(orNull(r.value))
	}
	return s + "]"
}

// design returns the indexer's design document.
func (ix *indexer) design() *DesignDoc { return ix.ddoc.Load() }

// allIndexers lists the running indexers of every bucket.
func (s *Service) allIndexers() []*indexer {
	sets, _ := s.reg.Sets()
	var out []*indexer
	for _, bv := range sets {
		out = append(out, bv.Members()...)
	}
	return out
}
