package views

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/index"
)

// Query is a view query checked against its view, ready to run.
type Query struct {
	s      *Service
	bucket string
	ddoc   string // the design document's name, without DesignDocPrefix
	ix     *indexer
	view   string
	p      Params // a copy: the caller's may be on its stack
	reduce bool
	// excludeExpired: expired=exclude, or the design document's default.
	excludeExpired bool
	group          index.Grouping
	// timedOut: a stale=false answer given from the index as it stood,
	// connection_timeout having passed before it caught up (see Run).
	timedOut bool
}

// Excludes reports whether the query leaves out the rows of expired
// documents (expired=exclude, or the design document's default).
func (q *Query) Excludes() bool { return q.excludeExpired }

// rangeOf is the index range the query reads, from its parameters (kept
// once, in p, rather than twice: a query is allocated for every request).
func (q *Query) rangeOf() index.Range {
	p := &q.p
	r := index.Range{
		Keys: p.Keys, StartKey: p.StartKey, EndKey: p.EndKey,
		StartDocID: p.StartKeyDocID, EndDocID: p.EndKeyDocID,
		StartDocIDSet: p.StartKeyDocIDSet, EndDocIDSet: p.EndKeyDocIDSet,
		InclusiveEnd: p.InclusiveEnd, Descending: p.Descending,
		ExcludeExpired: q.excludeExpired,
	}
	if p.Key != nil {
		r.StartKey, r.EndKey = p.Key, p.Key
	}
	return r
}

// Prepare finds the view and checks the parameters against it, so that every
// error is known before the first byte of the answer. A missing design
// document or view wraps ErrNotFound; a bad parameter is a *QueryError.
// The query keeps a copy of *p.
func (s *Service) Prepare(ctx context.Context, bucket, ddoc, view string, p *Params) (*Query, error) {
	ix, err := s.indexerFor(bucket, ddoc)
	if err != nil {
		return nil, err
	}
	d := ix.ddoc.Load()
	def, ok := d.Views[view]
	if !ok {
		return nil, fmt.Errorf("%w: View `%s` not defined in local design document `%s`.", ErrNotFound, view, d.ID)
	}
	q := &Query{s: s, bucket: bucket, ddoc: ddoc, ix: ix, view: view, p: *p}
	hasReduce := def.Reduce != ""
	q.reduce = hasReduce
	if p.Reduce != nil {
		if *p.Reduce && !hasReduce {
			return nil, parseErr("reduce", "Invalid URL parameter `reduce` for map view.")
		}
		q.reduce = *p.Reduce
	}
	grouping := p.Group || p.GroupLevel >= 0
	switch {
	case grouping && !q.reduce:
		param := "group"
		if !p.Group {
			param = "group_level"
		}
		return nil, parseErr(param, "Invalid URL parameter 'group' or  'group_level' for non-reduce view.")
	case p.IncludeDocs && q.reduce:
		return nil, parseErr("include_docs", "Query parameter `include_docs` is invalid for reduce views.")
	case p.Keys != nil && q.reduce && !p.Group && p.Forecast == 0:
		return nil, parseErr("keys", "Multi-key fetchs for reduce view must include `group=true`")
	}
	q.group = index.Grouping{Exact: p.Group, Level: max(p.GroupLevel, 0)}
	mode := p.Expired
	if mode == ExpiredDefault {
		mode = d.Expired
	}
	q.excludeExpired = mode == ExpiredExclude
	for _, k := range []struct {
		name string
		key  []byte
	}{{"key", p.Key}, {p.StartKeyParam(), p.StartKey}, {p.EndKeyParam(), p.EndKey}} {
		if err := checkKey(k.name, k.key); err != nil {
			return nil, err
		}
	}
	for _, k := range p.Keys {
		if err := checkKey("keys", k); err != nil {
			return nil, err
		}
	}
	if rng := q.rangeOf(); rng.StartKey != nil && rng.EndKey != nil {
		// The parameter named is the start key's, or the start document
		// id's when the ids order the range.
		param := p.StartKeyParam()
		c := index.Compare(rng.StartKey, rng.EndKey)
		if c == 0 && rng.StartDocID != "" && rng.EndDocID != "" {
			c = compareStrings(rng.StartDocID, rng.EndDocID)
			param = spelled(p.startDocIDName, "startkey_docid")
		}
		if !p.Descending && c > 0 {
			return nil, parseErr(param, "No rows can match your key range, reverse your start_key and end_key or set descending=true")
		}
		if p.Descending && c < 0 {
			return nil, parseErr(param, "No rows can match your key range, reverse your start_key and end_key or set descending=false")
		}
	}
	return q, nil
}

// checkKey refuses a key the index cannot compare (nested too deeply).
func checkKey(param string, key []byte) error {
	if key == nil {
		return nil
	}
	if err := index.CheckKey(key); err != nil {
		return badRequest(param, "invalid key: %s", strings.TrimPrefix(err.Error(), "index: "))
	}
	return nil
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Params returns the query's parameters (Prepare's copy of them).
func (q *Query) Params() *Params { return &q.p }

// Reduced reports whether the query answers with reduced rows.
func (q *Query) Reduced() bool { return q.reduce }

// Behind counts the changes the index has not seen yet, as of now: what an
// answer streamed now misses. It is 0 for stale=false, whose Run first
// brings the index up to the changes made before it, unless
// connection_timeout passed first.
func (q *Query) Behind() uint64 {
	if q.p.Stale == StaleFalse && !q.timedOut {
		return 0
	}
	return q.ix.pending()
}

// maxReplacedRetries bounds how many times Run starts a query again on the
// index of its design document's next version (see Run): enough for a query
// that spans a few replacements, while one that keeps losing its index to a
// stream of them ends with ErrClosed.
const maxReplacedRetries = 16

// Run brings the index up to date if the query asks (stale=false), then
// streams the answer to w as JSON, row by row: nothing is built in memory
// first. skip and limit apply after reduction and grouping.
//
// A design document replaced (or its index closed) while the query runs
// does not fail it, as in Couchbase and CouchDB: until the answer has begun
// to reach w (it is buffered, so a short answer reaches w only when
// complete), Run starts the query again on the design document's index at
// the time, finding the view by name again and checking the parameters
// against it, with the same stale semantics; a stale=false query waits for
// the new index to reach the sequence numbers it asked for first (as long as
// ctx allows). Every answer is one index's, whole. If the new version has no
// such view, the error wraps ErrNotFound with Couchbase's reason ("View `v`
// not defined in local design document `_design/d`."), and if the design
// document was deleted, ErrNotFound as for a query of a missing one. An
// answer that has begun to reach w cannot start again: the rows sent stay,
// and the answer ends with Couchbase's "errors" list naming the failure, as
// for any failure once rows are on their way (Run then returns a
// *StreamError wrapping ErrClosed). After maxReplacedRetries replacements
// within one query, Run gives up with an error wrapping ErrClosed.
//
// A stale=false query waits for the index at most connection_timeout
// (Params.ConnectionTimeout; Couchbase's default, a minute), as Couchbase's
// view merger waits for a node's share: then the index goes on catching up
// in the background, and the answer is the index's as it stands, followed
// by Couchbase's error row for a node that did not answer in time,
// {"from":"local","reason":"timeout"} in "errors" (with on_error=stop, the
// error row alone, no rows).
func (q *Query) Run(ctx context.Context, w io.Writer) error {
	cw := &countingWriter{w: w}
	target := q.staleTarget()
	wait := ctx
	if target != nil {
		var cancel context.CancelFunc
		wait, cancel = context.WithTimeout(ctx, q.p.ConnectionTimeout())
		defer cancel()
	}
	for tries := 0; ; tries++ {
		err := q.run(ctx, wait, cw, target)
		if err == nil || cw.n > 0 || tries == maxReplacedRetries || !q.replaced(err) || ctx.Err() != nil {
			return err
		}
		if perr := q.prepareAgain(ctx); perr != nil {
			return perr
		}
	}
}

// staleTarget returns, for stale=false, the feed position the answer must
// reflect: the bucket's high sequence numbers now. nil otherwise.
func (q *Query) staleTarget() []uint64 {
	if q.p.Stale != StaleFalse {
		return nil
	}
	return q.ix.feed.Handle().HighSeqnos()
}

// prepareAgain makes q the same query on its design document's current
// index, after its own was closed under it (see Run).
func (q *Query) prepareAgain(ctx context.Context) error {
	next, err := q.s.Prepare(ctx, q.bucket, q.ddoc, q.view, &q.p)
	if err != nil {
		return err
	}
	if next.ix == q.ix {
		return fmt.Errorf("%w: design document %s closed but still registered", ErrClosed, q.ix.id) // cannot happen: a closed indexer has left its set
	}
	q.s.replacedRetries.Add(1)
	*q = *next
	return nil
}

// open catches the index up to target (stale=false), waiting as long as
// wait (ctx or a context under it) allows, and returns a Reader of it: one
// snapshot answers, so that total_rows, the rows and the reductions agree,
// as CouchDB's and Couchbase's do, however the index changes meanwhile.
// timedOut says wait ended first (ctx did not): the Reader is then of the
// index as it stands, and the catch-up goes on in the background.
func (q *Query) open(ctx, wait context.Context, target []uint64) (rd *index.Reader, timedOut bool, err error) {
	if target != nil {
		if err := q.ix.feed.CatchUp(wait, target); err != nil {
			if ctx.Err() != nil || wait.Err() == nil || !errors.Is(err, context.DeadlineExceeded) || q.ix.life.Err() != nil {
				return nil, false, q.closedErr(err)
			}
			timedOut = true
			q.ix.feed.Kick() // without NoAutoUpdate, the follower goes on anyway
		}
	}
	if rd, err = q.ix.idx.Reader(); err != nil {
		return nil, false, q.closedErr(err)
	}
	return rd, timedOut, nil
}

// replaced reports whether err is the failure of a query whose indexer was
// closed under it (replaced or deleted, or its bucket detached), so that the
// design document's current index, if any, can answer instead.
func (q *Query) replaced(err error) bool {
	return errors.Is(err, ErrClosed) && q.ix.life.Err() != nil
}

// run runs the query once, on q.ix, writing its answer to cw (see Run);
// a stale=false query first catches the index up to target, as long as
// wait allows.
func (q *Query) run(ctx, wait context.Context, cw *countingWriter, target []uint64) error {
	if q.p.Stale == StaleUpdateAfter {
		defer q.ix.feed.Kick()
	}
	// A run again after a replacement takes a Reader of the new index.
	rd, timedOut, err := q.open(ctx, wait, target)
	if err != nil {
		return err
	}
	defer rd.Close()
	q.timedOut = timedOut
	// The instant of the answer: exact answers leave out the rows of the
	// documents expired by then.
	now := q.ix.bucket.Clock().Now()
	if q.p.Forecast > 0 {
		return q.runForecast(ctx, rd, cw, now)
	}
	rng := q.rangeOf()
	rng.Now = now
	bw := q.ix.answerWriter(cw)
	defer q.ix.putAnswerWriter(bw)
	skip, limit := q.p.Skip, q.p.Limit
	if timedOut && q.p.OnErrorStop {
		limit = 0 // Couchbase stops at the error: the error row alone
	}
	take := func() (emit bool, stop bool) {
		if skip > 0 {
			skip--
			return false, false
		}
		if limit == 0 {
			return false, true
		}
		if limit > 0 {
			limit--
		}
		return true, false
	}
	first := true
	sep := func() {
		if first {
			first = false
			bw.WriteString("\r\n")
		} else {
			bw.WriteString(",\r\n")
		}
	}
	if q.reduce {
		bw.WriteString(`{"rows":[`)
		err = rd.Reduce(ctx, q.view, rng, q.group, func(key, value []byte) error {
			emit, stop := take()
			if stop {
				return index.ErrStop
			}
			if emit {
				sep()
				bw.WriteString(`{"key":`)
				bw.Write(key)
				bw.WriteString(`,"value":`)
				bw.Write(value)
				bw.WriteByte('}')
			}
			return ctx.Err()
		})
		if err != nil {
			err = q.reduceFailed(err)
		} else {
			q.ix.reduced.succeeded(q.view)
		}
	} else {
		var total int
		var terr error
		if rng.ExcludeExpired {
			total, terr = rd.LiveRows(ctx, q.view, now)
		} else {
			total, terr = rd.TotalRows(q.view)
		}
		if terr != nil {
			return q.closedErr(terr)
		}
		bw.WriteString(`{"total_rows":`)
		bw.Write(strconv.AppendInt(bw.AvailableBuffer(), int64(total), 10))
		bw.WriteString(`,"rows":[`)
		coll := q.ix.bucket.DefaultCollection()
		err = rd.Query(ctx, q.view, rng, func(r index.Row) error {
			emit, stop := take()
			if stop {
				return index.ErrStop
			}
			if emit {
				sep()
				bw.WriteString(`{"id":`)
				writeJSONString(bw, r.DocID)
				bw.WriteString(`,"key":`)
				bw.Write(r.Key)
				bw.WriteString(`,"value":`)
				bw.Write(orNull(r.Value))
				if q.p.IncludeDocs {
					bw.WriteString(`,"doc":`)
					writeDoc(bw, coll, r.DocID)
				}
				bw.WriteByte('}')
			}
			return ctx.Err()
		})
	}
	if err != nil && !errors.Is(err, index.ErrStop) {
		err = q.closedErr(err)
		if cw.n == 0 {
			return err // nothing sent yet: the caller can still answer with an error
		}
		// Rows are on their way: end the answer as Couchbase does on a
		// partial failure, with the error after the rows.
		bw.WriteString("\r\n],\r\n\"errors\":[")
		if timedOut {
			bw.WriteString(timeoutRow + ",")
		}
		bw.WriteString("{\"from\":\"local\",\"reason\":")
		reason := err.Error()
		var re *ReduceError
		if errors.As(err, &re) {
			reason = re.Reason // Couchbase's, as an error row carries it
		}
		writeJSONString(bw, reason)
		bw.WriteString("}]\r\n}\n")
		if ferr := bw.Flush(); ferr != nil {
			return ferr
		}
		return &StreamError{Err: err}
	}
	if timedOut {
		bw.WriteString("\r\n],\r\n\"errors\":[" + timeoutRow + "]\r\n}\n")
		return bw.Flush()
	}
	bw.WriteString("\r\n]\r\n}\n")
	return bw.Flush()
}

// timeoutRow is Couchbase's error row for a node whose share of a view
// query did not come within connection_timeout: here, this node's index
// catching up for a stale=false query.
const timeoutRow = `{"from":"local","reason":"timeout"}`

// closedErr turns err into an error wrapping ErrClosed (and not err's own
// kind) when the design document was replaced or deleted, or its bucket
// detached, while the query ran: whatever failed failed because of that.
func (q *Query) closedErr(err error) error {
	if q.ix.life.Err() == nil || errors.Is(err, ErrClosed) {
		return err
	}
	return fmt.Errorf("%w: design document %s was replaced or deleted while answering (%v)", ErrClosed, q.ix.id, err)
}

// StreamError is an error that struck after the answer had started: the
// answer ends with an "errors" list instead, and the status stays 200.
type StreamError struct {
	// Err is what went wrong.
	Err error
}

func (e *StreamError) Error() string { return "views: answer cut short: " + e.Err.Error() }

// Unwrap returns Err.
func (e *StreamError) Unwrap() error { return e.Err }

// countingWriter counts the bytes that reached the client.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func orNull(v []byte) []byte {
	if len(v) == 0 {
		return []byte("null")
	}
	return v
}

// writeDoc writes a row's document as Couchbase's include_docs shows it, or
// null when it is expired, deleted or missing. Reading it never purges it.
func writeDoc(w answerBuffer, coll *engine.Collection, id string) {
	d, err := coll.Peek(id)
	if err != nil {
		w.WriteString("null")
		return
	}
	w.WriteString(`{"meta":{"id":`)
	writeJSONString(w, d.Key)
	w.WriteString(`,"rev":`)
	writeJSONString(w, d.Rev())
	w.WriteString(`,"expiration":` + strconv.FormatInt(d.Expiration, 10))
	w.WriteString(`,"flags":` + strconv.FormatUint(uint64(d.Flags), 10) + `}`)
	if d.Type == engine.TypeJSON {
		w.WriteString(`,"json":`)
		w.Write(d.Value)
	} else {
		w.WriteString(`,"base64":"` + base64.StdEncoding.EncodeToString(d.Value) + `"`)
	}
	w.WriteByte('}')
}

// answerWriter returns a 32 KiB buffered writer to w from the indexer's
// pool; the caller gives it back with putAnswerWriter once the answer is
// written.
func (ix *indexer) answerWriter(w io.Writer) *bufio.Writer {
	if bw, ok := ix.answers.Get().(*bufio.Writer); ok {
		bw.Reset(w)
		return bw
	}
	return bufio.NewWriterSize(w, 32<<10)
}

// putAnswerWriter returns bw to the pool, holding neither the client's
// writer nor what was left unwritten.
func (ix *indexer) putAnswerWriter(bw *bufio.Writer) {
	bw.Reset(io.Discard)
	ix.answers.Put(bw)
}
