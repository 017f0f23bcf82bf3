package views

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/mayflydb/mayfly/index"
	"github.com/mayflydb/mayfly/internal/jsonstr"
)

// A view query across a cluster's nodes: each node answers its Partial (the
// rows of the documents of the partitions it covers), and the node the
// client asked merges them with Merge into exactly the answer one node
// holding every document would give.

// Share selects the part of a view one node answers for.
type Share struct {
	// Partitions, when not nil, are the partitions (by number, true for
	// those covered) whose documents' rows the node answers for. nil
	// answers for every row.
	Partitions []bool
	// Now is the instant, in Unix seconds, at which expired=exclude leaves
	// documents out: the querying node's, the same for every node. 0 is the
	// bucket clock's now.
	Now int64
}

// maxSubsets bounds the partition sets an indexer keeps an index.Subset
// for (and so caches reductions for): a node answers for one set per
// coverage, and a few while coverage changes.
const maxSubsets = 8

// subset returns the index.Subset of the documents of the partitions
// covered, the same one for the same partitions (the index caches the
// reductions of a share per Subset).
func (ix *indexer) subset(covered []bool) *index.Subset {
	key := make([]byte, len(covered))
	for i, c := range covered {
		if c {
			key[i] = 1
		}
	}
	ix.subsets.Lock()
	defer ix.subsets.Unlock()
	if s, ok := ix.subsets.m[string(key)]; ok {
		return s
	}
	if ix.subsets.m == nil || len(ix.subsets.m) >= maxSubsets {
		ix.subsets.m = map[string]*index.Subset{}
	}
	b := ix.bucket
	s := index.NewSubset(func(id string) bool {
		p := b.PartitionOf(id)
		return p < len(covered) && covered[p]
	})
	ix.subsets.m[string(key)] = s
	return s
}

// Partial is one node's part of a view query's answer: its rows as the
// query selects them (groups and their partial reductions for a reduce
// query), before skip, and at most skip+limit of them.
type Partial struct {
	// TotalRows counts the node's rows of the view (map queries).
	TotalRows int
	// Rows are in the answer's order: by Seg, then by key collation and
	// document id (both reversed when descending).
	Rows []PartialRow
}

// PartialRow is a row of a Partial.
type PartialRow struct {
	// Seg is, with keys=, the index in keys of the key this row answers
	// (a key given twice has two segments); 0 otherwise.
	Seg int
	// ID is the document id of a map row ("" for a reduce row).
	ID string
	// Key and Value are raw JSON: the row's, or a group's key and its
	// partial reduction.
	Key, Value []byte
	// Doc is the document as include_docs shows it (raw JSON), or nil.
	Doc []byte
}

// NodeError names a node whose part of an answer is missing, as an entry of
// Couchbase's "errors" list ({"from": ..., "reason": ...}).
type NodeError struct {
	From, Reason string
}

// Partial runs the query on this node's index for the rows of share: what
// Merge combines with the other nodes' parts. stale, replacement of the
// design document and errors are as for Run, but for a stale=false share
// whose index does not catch up within connection_timeout: that fails with
// an error wrapping ErrTimeout, the share missing as another node's would
// be.
func (q *Query) Partial(ctx context.Context, share Share) (*Partial, error) {
	if q.p.Forecast > 0 {
		return nil, badRequest("forecast", "Query parameter `forecast` is not answered across nodes")
	}
	target, err := q.shareTarget(ctx, share)
	if err != nil {
		return nil, err
	}
	wait := ctx
	if target != nil {
		var cancel context.CancelFunc
		wait, cancel = context.WithTimeout(ctx, q.p.ConnectionTimeout())
		defer cancel()
	}
	for tries := 0; ; tries++ {
		part, err := q.partial(ctx, wait, share, target)
		if err == nil || tries == maxReplacedRetries || !q.replaced(err) || ctx.Err() != nil {
			return part, err
		}
		if err := q.prepareAgain(ctx); err != nil {
			return nil, err
		}
	}
}

// shareTarget is staleTarget for a share: with stale=false, on a cluster,
// this node's copies of the share's partitions are first made current
// (engine.Bucket.MakeCurrent: a read barrier to each partition's leader,
// which this node often is not: a preferred leader down, leadership
// moved), so that the high sequence numbers read after include every
// write acknowledged before the query, whichever node acknowledged it;
// include_docs then reads current documents too. The barrier has three
// quarters of the connection timeout: a partition with no leader (or a
// leader that does not answer) by then fails the share with an error
// wrapping engine.ErrNotCurrent, in time for the querying node to list
// it in the answer's errors, rather than answer from a copy that may
// miss a write.
func (q *Query) shareTarget(ctx context.Context, share Share) ([]uint64, error) {
	if q.p.Stale != StaleFalse {
		return nil, nil
	}
	var parts []int
	for p, covered := range share.Partitions {
		if covered {
			parts = append(parts, p)
		}
	}
	if share.Partitions == nil {
		parts = make([]int, q.ix.bucket.NumPartitions())
		for p := range parts {
			parts[p] = p
		}
	}
	bctx, cancel := context.WithTimeout(ctx, q.p.ConnectionTimeout()*3/4)
	defer cancel()
	if err := q.ix.bucket.MakeCurrent(bctx, parts); err != nil {
		return nil, fmt.Errorf("views: stale=false: %w", err)
	}
	return q.staleTarget(), nil
}

// partial answers Partial once, on q.ix.
func (q *Query) partial(ctx, wait context.Context, share Share, target []uint64) (*Partial, error) {
	if q.p.Stale == StaleUpdateAfter {
		defer q.ix.feed.Kick()
	}
	rd, timedOut, err := q.open(ctx, wait, target)
	if err != nil {
		return nil, err
	}
	if timedOut {
		rd.Close()
		return nil, fmt.Errorf("%w: design document %s: the index did not catch up within connection_timeout (%v)", ErrTimeout, q.ix.id, q.p.ConnectionTimeout())
	}
	defer rd.Close()
	now := share.Now
	if now == 0 {
		now = q.ix.bucket.Clock().Now()
	}
	rng := q.rangeOf()
	rng.Now = now
	if share.Partitions != nil {
		rng.Include = q.ix.subset(slices.Clone(share.Partitions))
	}
	want := -1 // rows to send: skip+limit, as the merged answer may need them all
	if q.p.Limit >= 0 {
		want = q.p.Skip + q.p.Limit
	}
	part := &Partial{}
	full := func() bool { return want >= 0 && len(part.Rows) >= want }
	segs := 1
	if rng.Keys != nil {
		segs = len(rng.Keys)
	}
	coll := q.ix.bucket.DefaultCollection()
	var doc bytes.Buffer
	for seg := 0; seg < segs && !full(); seg++ {
		r := rng
		if rng.Keys != nil {
			r.Keys = rng.Keys[seg : seg+1]
		}
		if q.reduce {
			err = rd.Reduce(ctx, q.view, r, q.group, func(key, value []byte) error {
				part.Rows = append(part.Rows, PartialRow{Seg: seg, Key: key, Value: value})
				if full() {
					return index.ErrStop
				}
				return ctx.Err()
			})
			if err != nil {
				return nil, q.closedErr(q.reduceFailed(err))
			}
			continue
		}
		err = rd.Query(ctx, q.view, r, func(row index.Row) error {
			pr := PartialRow{Seg: seg, ID: row.DocID, Key: row.Key, Value: orNull(row.Value)}
			if q.p.IncludeDocs {
				doc.Reset()
				writeDoc(&doc, coll, row.DocID)
				pr.Doc = bytes.Clone(doc.Bytes())
			}
			part.Rows = append(part.Rows, pr)
			if full() {
				return index.ErrStop
			}
			return ctx.Err()
		})
		if err != nil {
			return nil, q.closedErr(err)
		}
	}
	if q.reduce {
		q.ix.reduced.succeeded(q.view)
		return part, nil
	}
	switch {
	case rng.Include != nil && rng.ExcludeExpired:
		// The node's share of the view, live at now: counted row by row.
		err = rd.Query(ctx, q.view, index.Range{ExcludeExpired: true, Now: now, Include: rng.Include}, func(index.Row) error {
			part.TotalRows++
			return nil
		})
	case rng.Include != nil:
		part.TotalRows, err = rd.CountRows(ctx, q.view, rng.Include)
	case rng.ExcludeExpired:
		part.TotalRows, err = rd.LiveRows(ctx, q.view, now)
	default:
		part.TotalRows, err = rd.TotalRows(q.view)
	}
	if err != nil {
		return nil, q.closedErr(err)
	}
	return part, nil
}

// reduceFailed turns a failed reduce into Couchbase's reduce error, and
// records it in the view's recent reduce errors.
func (q *Query) reduceFailed(err error) error {
	err = reduceError(q.view, err, q.ix.reduced.updating(q.view))
	var re *ReduceError
	if errors.As(err, &re) {
		q.ix.recordReduceError(q.view, re)
	}
	return err
}

// Merge writes to w the answer of the query from the nodes' parts (each
// from Partial, with the query's parameters and one Share.Now), exactly as
// Run on one node holding all the rows would: map rows merged in collation
// order with document-id ties, reversed when descending; with keys=, each
// key's rows in the caller's order; groups with equal keys (and, without
// grouping, every node's reduction) re-reduced with the view's reducer;
// total_rows summed; skip and limit applied to the merged rows. errs, the
// nodes whose parts are missing, end the answer as Couchbase's "errors"
// list. A re-reduce that fails before anything reached w is returned as
// Run's would be; after, it ends the answer as Run's failures do.
func (q *Query) Merge(ctx context.Context, parts []*Partial, errs []NodeError, w io.Writer) error {
	cw := &countingWriter{w: w}
	bw := q.ix.answerWriter(cw)
	defer q.ix.putAnswerWriter(bw)
	m := merger{desc: q.p.Descending, parts: parts, heads: make([]int, len(parts))}
	skip, limit := q.p.Skip, q.p.Limit
	first := true
	emit := func(row PartialRow) bool {
		if skip > 0 {
			skip--
			return true
		}
		if limit == 0 {
			return false
		}
		if limit > 0 {
			limit--
		}
		if first {
			first = false
			bw.WriteString("\r\n")
		} else {
			bw.WriteString(",\r\n")
		}
		if !q.reduce {
			bw.WriteString(`{"id":`)
			writeJSONString(bw, row.ID)
			bw.WriteString(`,"key":`)
		} else {
			bw.WriteString(`{"key":`)
		}
		bw.Write(row.Key)
		bw.WriteString(`,"value":`)
		bw.Write(row.Value)
		if q.p.IncludeDocs && !q.reduce {
			bw.WriteString(`,"doc":`)
			if row.Doc == nil {
				bw.WriteString("null")
			} else {
				bw.Write(row.Doc)
			}
		}
		bw.WriteByte('}')
		return true
	}
	var err error
	if q.reduce {
		bw.WriteString(`{"rows":[`)
		err = m.groups(func(rows []PartialRow) (bool, error) {
			if err := ctx.Err(); err != nil {
				return false, err
			}
			row := rows[0]
			if len(rows) > 1 {
				vals := make([][]byte, len(rows))
				for i, r := range rows {
					vals[i] = r.Value
				}
				v, err := q.rereduce(ctx, vals)
				if err != nil {
					return false, q.reduceFailed(err)
				}
				row.Value = v
			}
			return emit(row), nil
		})
	} else {
		total := 0
		for _, p := range parts {
			total += p.TotalRows
		}
		bw.WriteString(`{"total_rows":` + strconv.Itoa(total) + `,"rows":[`)
		for row, ok := m.next(); ok && emit(row); row, ok = m.next() {
		}
	}
	if err != nil {
		if cw.n == 0 {
			return err // nothing sent yet: the caller can still answer with an error
		}
		reason := err.Error()
		var re *ReduceError
		if errors.As(err, &re) {
			reason = re.Reason
		}
		errs = append(errs, NodeError{From: "local", Reason: reason})
		err = &StreamError{Err: err}
	}
	bw.WriteString("\r\n]")
	if len(errs) > 0 {
		bw.WriteString(",\r\n\"errors\":[")
		for i, e := range errs {
			if i > 0 {
				bw.WriteByte(',')
			}
			bw.WriteString(`{"from":`)
			writeJSONString(bw, e.From)
			bw.WriteString(`,"reason":`)
			writeJSONString(bw, e.Reason)
			bw.WriteByte('}')
		}
		bw.WriteString("]")
	}
	bw.WriteString("\r\n}\n")
	if ferr := bw.Flush(); ferr != nil {
		return ferr
	}
	return err
}

// rereduce combines partial reductions of the view with its reducer (the
// built-ins in Go, a JavaScript reduce with rereduce true), as the index
// combines those of its subtrees.
func (q *Query) rereduce(ctx context.Context, vals [][]byte) ([]byte, error) {
	for _, vc := range q.ix.cfg.Views {
		if vc.Name != q.view {
			continue
		}
		if vc.Reducer == nil {
			break
		}
		v, err := vc.Reducer.Rereduce(ctx, vals)
		if err != nil {
			return nil, err
		}
		if len(v) > index.MaxReductionSize {
			return nil, fmt.Errorf("%w: %d bytes", index.ErrReductionTooLarge, len(v))
		}
		return v, nil
	}
	return nil, fmt.Errorf("%w: %q", index.ErrNoReducer, q.view)
}

// merger walks the rows of several parts in the answer's order.
type merger struct {
	desc  bool
	parts []*Partial
	heads []int // the next row of each part
	same  []PartialRow
}

// compare orders two rows of the answer: by segment, then key collation,
// then document id (key and id reversed when descending).
func (m *merger) compare(a, b *PartialRow) int {
	if a.Seg != b.Seg {
		return a.Seg - b.Seg
	}
	c := index.Compare(a.Key, b.Key)
	if c == 0 {
		c = strings.Compare(a.ID, b.ID)
	}
	if m.desc {
		c = -c
	}
	return c
}

// least returns the part whose next row comes first, or -1 when every part
// is done. Of rows that tie, the first part's comes first: a node's rows
// of one document and key stay in its order (the order of emits).
func (m *merger) least() int {
	best := -1
	for i, p := range m.parts {
		if m.heads[i] >= len(p.Rows) {
			continue
		}
		if best < 0 || m.compare(&p.Rows[m.heads[i]], &m.parts[best].Rows[m.heads[best]]) < 0 {
			best = i
		}
	}
	return best
}

// next returns the next map row.
func (m *merger) next() (PartialRow, bool) {
	i := m.least()
	if i < 0 {
		return PartialRow{}, false
	}
	m.heads[i]++
	return m.parts[i].Rows[m.heads[i]-1], true
}

// groups calls fn with each group of the merged answer: the rows of the
// parts with that segment and group key (the parts' partial reductions of
// it), until fn returns false or an error.
func (m *merger) groups(fn func([]PartialRow) (bool, error)) error {
	for {
		i := m.least()
		if i < 0 {
			return nil
		}
		lead := m.parts[i].Rows[m.heads[i]]
		m.same = m.same[:0]
		for j, p := range m.parts {
			if m.heads[j] < len(p.Rows) && m.compare(&p.Rows[m.heads[j]], &lead) == 0 {
				m.same = append(m.same, p.Rows[m.heads[j]])
				m.heads[j]++
			}
		}
		if more, err := fn(m.same); err != nil || !more {
			return err
		}
	}
}

// answerBuffer is what writeDoc writes to: the answer's bufio.Writer, or a
// bytes.Buffer for a Partial's documents.
type answerBuffer interface {
	io.Writer
	io.StringWriter
	io.ByteWriter
	// AvailableBuffer returns an empty slice with the buffer's free room,
	// to append to and Write, as bufio.Writer's and bytes.Buffer's do.
	AvailableBuffer() []byte
}

// writeJSONString writes s as a JSON string (as json.Marshal would),
// building it in w's own free room.
func writeJSONString(w answerBuffer, s string) {
	w.Write(jsonstr.Append(w.AvailableBuffer(), s))
}

var _ answerBuffer = (*bufio.Writer)(nil)
