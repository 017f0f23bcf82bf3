package views

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
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
// Merge combines with the other nodes' parts, held whole (Stream gives the
// same rows one at a time). stale, replacement of the design document and
// errors are as for Run, but for a stale=false share whose index does not
// catch up within connection_timeout: that fails with an error wrapping
// ErrTimeout, the share missing as another node's would be.
func (q *Query) Partial(ctx context.Context, share Share) (*Partial, error) {
	for tries := 0; ; tries++ {
		st, err := q.Stream(ctx, share)
		if err != nil {
			return nil, err
		}
		part := &Partial{TotalRows: st.TotalRows}
		for {
			row, rerr := st.Next()
			if rerr != nil {
				if rerr != io.EOF {
					err = rerr
				}
				break
			}
			if row.Doc != nil {
				row.Doc = bytes.Clone(row.Doc) // the stream reuses its buffer
			}
			part.Rows = append(part.Rows, row)
		}
		st.Close()
		if err == nil {
			return part, nil
		}
		if tries == maxReplacedRetries || !q.replaced(err) || ctx.Err() != nil {
			return nil, err
		}
		if err := q.prepareAgain(ctx); err != nil {
			return nil, err
		}
	}
}

// ShareStream is one node's part of a view query's answer, read a row at a
// time as the node's index is walked (Query.Stream): Partial's rows,
// without holding them. It holds a snapshot of the index until Close.
// Not safe for concurrent use.
type ShareStream struct {
	// TotalRows counts the node's rows of the view (map queries), known
	// before the first row.
	TotalRows int
	rd        *index.Reader
	next      func() (PartialRow, error, bool)
	stop      func()
	err       error // the error Next returned last, once it is not nil
}

// Next returns the stream's next row, in Partial's order, or io.EOF after
// the last. The row's bytes are valid until the next call (a document of
// include_docs is written to a buffer used again). An error other than
// io.EOF ends the stream part way: the node's rows are missing from there
// (a design document replaced under the query, a reduce that failed).
func (s *ShareStream) Next() (PartialRow, error) {
	if s.err != nil {
		return PartialRow{}, s.err
	}
	row, err, ok := s.next()
	switch {
	case !ok:
		s.err = io.EOF
	case err != nil:
		s.err = err
	default:
		return row, nil
	}
	return PartialRow{}, s.err
}

// Close ends the walk and gives the index snapshot back. It may be
// called more than once.
func (s *ShareStream) Close() {
	if s.stop != nil {
		s.stop()
		s.stop = nil
		s.rd.Close()
	}
}

// Stream is Partial one row at a time: the catch-up for stale=false and
// this node's share of total_rows come first, then the rows are read as
// the index is walked, a row each call of the stream's Next, so that a
// share costs memory in proportion to a row, not to its rows. The caller
// must Close the stream. A replacement of the design document before the
// first row is answered by the new index, as Run's is; one after ends the
// stream with an error.
func (q *Query) Stream(ctx context.Context, share Share) (*ShareStream, error) {
	if q.p.Forecast > 0 {
		return nil, badRequest("forecast", "a forecast share is ForecastShare's, not a row stream")
	}
	return runShare(ctx, q, share, q.stream)
}

// runShare runs answer, a share's query (Stream's or ForecastShare's), on
// the target stale=false asks for (shareTarget), with connection_timeout
// to reach it, again on the new index when the design document is replaced
// meanwhile (at most maxReplacedRetries times).
func runShare[T any](ctx context.Context, q *Query, share Share, answer func(ctx, wait context.Context, share Share, target []uint64) (T, error)) (T, error) {
	var none T
	target, err := q.shareTarget(ctx, share)
	if err != nil {
		return none, err
	}
	wait := ctx
	if target != nil {
		var cancel context.CancelFunc
		wait, cancel = context.WithTimeout(ctx, q.p.ConnectionTimeout())
		defer cancel()
	}
	for tries := 0; ; tries++ {
		v, err := answer(ctx, wait, share, target)
		if err == nil || tries == maxReplacedRetries || !q.replaced(err) || ctx.Err() != nil {
			return v, err
		}
		if err := q.prepareAgain(ctx); err != nil {
			return none, err
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

// stream opens Stream once, on q.ix.
func (q *Query) stream(ctx, wait context.Context, share Share, target []uint64) (*ShareStream, error) {
	rd, timedOut, err := q.open(ctx, wait, target)
	if err != nil {
		return nil, err
	}
	if timedOut {
		rd.Close()
		return nil, fmt.Errorf("%w: design document %s: the index did not catch up within connection_timeout (%v)", ErrTimeout, q.ix.id, q.p.ConnectionTimeout())
	}
	now := share.Now
	if now == 0 {
		now = q.ix.bucket.Clock().Now()
	}
	rng := q.rangeOf()
	rng.Now = now
	if share.Partitions != nil {
		rng.Include = q.ix.subset(slices.Clone(share.Partitions))
	}
	if q.p.Stale == StaleUpdateAfter {
		q.ix.feed.Kick() // the snapshot is taken: the index may move on
	}
	st := &ShareStream{rd: rd}
	if !q.reduce {
		// The node's share of total_rows, from the same snapshot as the
		// rows, before them: the merged answer begins with the sum.
		switch {
		case rng.Include != nil && rng.ExcludeExpired:
			// The node's share of the view, live at now: counted row by row.
			err = rd.Query(ctx, q.view, index.Range{ExcludeExpired: true, Now: now, Include: rng.Include}, func(index.Row) error {
				st.TotalRows++
				return nil
			})
		case rng.Include != nil:
			st.TotalRows, err = rd.CountRows(ctx, q.view, rng.Include)
		case rng.ExcludeExpired:
			st.TotalRows, err = rd.LiveRows(ctx, q.view, now)
		default:
			st.TotalRows, err = rd.TotalRows(q.view)
		}
		if err != nil {
			rd.Close()
			return nil, q.closedErr(err)
		}
	}
	st.next, st.stop = iter.Pull2(q.shareRows(ctx, rd, rng))
	return st, nil
}

// shareRows walks rd for the rows of a share (rng, its Include set): at
// most skip+limit of them, as the merged answer may need them all; with
// keys=, key by key, each row with its key's position. The walk stops when
// the consumer does; an error ends it, yielded last.
func (q *Query) shareRows(ctx context.Context, rd *index.Reader, rng index.Range) iter.Seq2[PartialRow, error] {
	return func(yield func(PartialRow, error) bool) {
		want := -1 // rows to send: skip+limit, as the merged answer may need them all
		if q.p.Limit >= 0 {
			want = q.p.Skip + q.p.Limit
		}
		sent, stopped := 0, false
		// give yields a row and says whether the walk goes on.
		give := func(row PartialRow) error {
			if !yield(row, nil) {
				stopped = true
				return index.ErrStop
			}
			sent++
			if want >= 0 && sent >= want {
				return index.ErrStop
			}
			return ctx.Err()
		}
		segs := 1
		if rng.Keys != nil {
			segs = len(rng.Keys)
		}
		coll := q.ix.bucket.DefaultCollection()
		var doc bytes.Buffer
		for seg := 0; seg < segs && !stopped && (want < 0 || sent < want); seg++ {
			r := rng
			if rng.Keys != nil {
				r.Keys = rng.Keys[seg : seg+1]
			}
			var err error
			if q.reduce {
				err = rd.Reduce(ctx, q.view, r, q.group, func(key, value []byte) error {
					return give(PartialRow{Seg: seg, Key: key, Value: value})
				})
				if err != nil && !stopped {
					yield(PartialRow{}, q.closedErr(q.reduceFailed(err)))
				}
			} else {
				err = rd.Query(ctx, q.view, r, func(row index.Row) error {
					pr := PartialRow{Seg: seg, ID: row.DocID, Key: row.Key, Value: orNull(row.Value)}
					if q.p.IncludeDocs {
						doc.Reset()
						writeDoc(&doc, coll, row.DocID)
						pr.Doc = doc.Bytes()
					}
					return give(pr)
				})
				if err != nil && !stopped {
					yield(PartialRow{}, q.closedErr(err))
				}
			}
			if err != nil {
				return
			}
		}
		if q.reduce && !stopped {
			q.ix.reduced.succeeded(q.view)
		}
	}
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

// Source is one node's part of a query's answer as Merge reads it: a
// Partial held whole (Partial.Source), this node's ShareStream
// (ShareStream.Source) or the rows another node sends as they arrive.
type Source struct {
	// From names the node in the answer's "errors" list should its rows
	// end part way.
	From string
	// TotalRows counts the node's rows of the view (map queries).
	TotalRows int
	// Next returns the node's next row, in Partial's order, or io.EOF
	// after the last. The row's bytes need stay valid only until the next
	// call. Another error ends the node's rows part way: it is named in
	// the answer's "errors" (its text the reason; a *NodeError gives its
	// own From and Reason), but for one matching ErrReduce, which fails
	// the query (see MergeSources).
	Next func() (PartialRow, error)
	// Ready, when not nil, says whether Next would return without waiting
	// (another node's rows on their way). Before Merge waits for a row it
	// flushes what it has written, so that the client has every row it
	// can have (see Merge).
	Ready func() bool
}

// Source returns p's rows as a Source.
func (p *Partial) Source(from string) Source {
	i := 0
	return Source{From: from, TotalRows: p.TotalRows, Next: func() (PartialRow, error) {
		if i >= len(p.Rows) {
			return PartialRow{}, io.EOF
		}
		i++
		return p.Rows[i-1], nil
	}}
}

// Source returns the stream as a Source named from in the answer's errors.
func (s *ShareStream) Source(from string) Source {
	return Source{From: from, TotalRows: s.TotalRows, Next: s.Next}
}

// Error returns the reason.
func (e *NodeError) Error() string { return e.From + ": " + e.Reason }

// Merge writes to w the answer of the query from the nodes' parts (each
// from Partial, with the query's parameters and one Share.Now): MergeSources
// over the parts held whole.
func (q *Query) Merge(ctx context.Context, parts []*Partial, errs []NodeError, w io.Writer) error {
	srcs := make([]Source, len(parts))
	for i, p := range parts {
		srcs[i] = p.Source("")
	}
	return q.MergeSources(ctx, srcs, errs, w)
}

// MergeSources writes to w the answer of the query from the nodes' rows
// (each node's Partial's, read a row at a time; with the query's
// parameters and one Share.Now), exactly as Run on one node holding all
// the rows would: map rows merged in collation order with document-id
// ties, reversed when descending; with keys=, each key's rows in the
// caller's order; groups with equal keys (and, without grouping, every
// node's reduction) re-reduced with the view's reducer; total_rows summed;
// skip and limit applied to the merged rows. It holds one row of each
// node at a time (a k-way merge), never a node's rows. errs, the nodes
// whose parts are missing, end the answer as Couchbase's "errors" list.
//
// Before it waits for a node's next row (Source.Ready false) it flushes
// the answer written so far to w, and w too when w has a Flush method
// (an http.Flusher, or one that returns an error), so that a client reads
// the rows merged while a node's are on their way.
//
// A node whose rows end part way (Source.Next's error) is named in the
// errors list: with on_error=stop the rows end there, otherwise the merge
// goes on without it. The answer has then begun (its head at least), so
// Merge returns a *StreamError. A node's rows that end with an error
// matching ErrReduce (its share's reduce failed: the view's data or
// functions at fault, not the node) are not a node's failure: the merge
// ends there, as a re-reduce that fails does. Either is returned as Run's
// would be when nothing reached w yet (the caller answers Couchbase's
// error, 500 on one node); after, it ends the answer as Run's failures do.
func (q *Query) MergeSources(ctx context.Context, srcs []Source, errs []NodeError, w io.Writer) error {
	cw := &countingWriter{w: w}
	bw := q.ix.answerWriter(cw)
	defer q.ix.putAnswerWriter(bw)
	var flushed int64 // cw.n at the last flush
	first := true     // no row written yet
	flush := func() {
		if first {
			// Nothing but the head yet: held, so that a failure before
			// the first row (a re-reduce's) is still answered with its
			// status, as one node's Run answers it.
			return
		}
		if bw.Buffered() == 0 && cw.n == flushed {
			return // nothing written since
		}
		if bw.Flush() != nil {
			return
		}
		flushed = cw.n
		switch f := w.(type) {
		case http.Flusher:
			f.Flush()
		case interface{ Flush() error }:
			f.Flush()
		}
	}
	m := &merger{desc: q.p.Descending, srcs: srcs, flush: flush}
	skip, limit := q.p.Skip, q.p.Limit
	emit := func(row *PartialRow) bool {
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
		m.start()
		var vals [][]byte
		err = m.groups(func(rows []*PartialRow) (bool, error) {
			if err := ctx.Err(); err != nil {
				return false, err
			}
			if m.err != nil {
				return false, m.err
			}
			if q.p.OnErrorStop && len(m.failed) > 0 {
				return false, nil // Couchbase stops at the error
			}
			row := *rows[0]
			if len(rows) > 1 {
				vals = vals[:0]
				for _, r := range rows {
					vals = append(vals, r.Value)
				}
				v, err := q.rereduce(ctx, vals)
				if err != nil {
					return false, q.reduceFailed(err)
				}
				row.Value = v
			}
			return emit(&row), nil
		})
		if err == nil {
			err = m.err // met after the last group
		}
	} else {
		total := 0
		for _, s := range srcs {
			total += s.TotalRows
		}
		bw.WriteString(`{"total_rows":` + strconv.Itoa(total) + `,"rows":[`)
		m.start()
		for {
			i := m.least()
			if i < 0 || (q.p.OnErrorStop && len(m.failed) > 0) {
				break
			}
			if err = ctx.Err(); err != nil || !emit(&m.heads[i]) {
				break
			}
			m.advance(i)
		}
	}
	late := len(m.failed) > 0
	errs = append(errs, m.failed...)
	if err != nil {
		if cw.n == 0 && (!late || errors.Is(err, ErrReduce)) {
			// Nothing sent yet: the caller can still answer with an
			// error. A reduce that failed (here or in a node's share)
			// fails the query so, as on one node, whatever other node
			// failed besides.
			return err
		}
		reason := err.Error()
		var re *ReduceError
		if errors.As(err, &re) {
			reason = re.Reason
		}
		errs = append(errs, NodeError{From: "local", Reason: reason})
		err = &StreamError{Err: err}
	} else if late {
		err = &StreamError{Err: &m.failed[0]}
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

// merger walks the rows of several sources in the answer's order, holding
// the next row of each (its head) and no other.
type merger struct {
	desc   bool
	srcs   []Source
	heads  []PartialRow
	live   []bool // whether heads[i] is a row (the source has not ended)
	failed []NodeError
	err    error  // a source's reduce that failed (ErrReduce): it ends the merge
	flush  func() // before a wait for a source's row
	same   []*PartialRow
	sameAt []int
}

// start reads every source's first row.
func (m *merger) start() {
	m.heads = make([]PartialRow, len(m.srcs))
	m.live = make([]bool, len(m.srcs))
	for i := range m.srcs {
		m.advance(i)
	}
}

// advance replaces source i's head with its next row (the head's bytes
// may be overwritten). A source that ends part way is recorded in failed.
func (m *merger) advance(i int) {
	s := &m.srcs[i]
	if s.Ready != nil && m.flush != nil && !s.Ready() {
		m.flush()
	}
	row, err := s.Next()
	switch {
	case err == nil:
		m.heads[i], m.live[i] = row, true
		return
	case err == io.EOF:
	case errors.Is(err, ErrReduce):
		// The view's data or reduce at fault, not the node: the query
		// fails, as on one node (MergeSources).
		if m.err == nil {
			m.err = err
		}
	default:
		var ne *NodeError
		if errors.As(err, &ne) {
			m.failed = append(m.failed, *ne)
		} else {
			m.failed = append(m.failed, NodeError{From: s.From, Reason: err.Error()})
		}
	}
	m.heads[i], m.live[i] = PartialRow{}, false
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

// least returns the source whose head comes first, or -1 when every source
// is done. Of rows that tie, the first source's comes first: a node's rows
// of one document and key stay in its order (the order of emits).
func (m *merger) least() int {
	best := -1
	for i := range m.srcs {
		if !m.live[i] {
			continue
		}
		if best < 0 || m.compare(&m.heads[i], &m.heads[best]) < 0 {
			best = i
		}
	}
	return best
}

// groups calls fn with each group of the merged answer: the heads of the
// sources with that segment and group key (the nodes' partial reductions
// of it), until fn returns false or an error.
func (m *merger) groups(fn func([]*PartialRow) (bool, error)) error {
	for {
		i := m.least()
		if i < 0 {
			return nil
		}
		m.same, m.sameAt = m.same[:0], m.sameAt[:0]
		for j := range m.srcs {
			if m.live[j] && m.compare(&m.heads[j], &m.heads[i]) == 0 {
				m.same = append(m.same, &m.heads[j])
				m.sameAt = append(m.sameAt, j)
			}
		}
		more, err := fn(m.same)
		if err != nil || !more {
			return err
		}
		for _, j := range m.sameAt {
			m.advance(j)
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
