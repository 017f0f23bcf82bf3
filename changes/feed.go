package changes

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/gjson"

	"github.com/mayflydb/mayfly/engine"
)

// Sink is where a feed writes: an HTTP response, say. Flush pushes what was
// written to the client; it blocks while the client does not read.
type Sink interface {
	io.Writer
	Flush() error
}

// chunkSize is how many documents the feed takes from the bucket at a time,
// and bufferSize how many bytes it holds before writing them to the sink:
// together the most a feed holds for a client that does not read.
const (
	chunkSize  = 128
	bufferSize = 32 << 10
)

// Feed is one _changes request, opened on a bucket and ready to run.
type Feed struct {
	b    *engine.Bucket
	req  Request
	cid  engine.CollectionID
	ids  map[string]bool
	from position
	// marks caps a reverse walk's places per pass (reverseMarks; tests
	// lower it), and peak is the most places and documents one held.
	marks, peak int
	// keepHook, when set (tests), is called by keep, in the scan of the
	// bucket and under its partition's lock: a test holds a scan there.
	keepHook func()

	read, sent atomic.Int64
}

// Open checks req against b and returns the feed, reading collection cid.
// A since the bucket cannot serve is an error wrapping ErrRollback; a
// malformed one wraps ErrBadRequest. Nothing is written yet.
func Open(b *engine.Bucket, cid engine.CollectionID, req *Request) (*Feed, error) {
	if !b.Warm() {
		return nil, engine.ErrWarmup // the feed is incomplete until every document is loaded
	}
	f := &Feed{b: b, req: *req, cid: cid}
	if req.DocIDs != nil {
		f.ids = make(map[string]bool, len(req.DocIDs))
		for _, id := range req.DocIDs {
			f.ids[id] = true
		}
	}
	if req.Descending {
		return f, nil // since is ignored, as CouchDB does
	}
	switch req.Since {
	case "", "0":
		f.from = position{uuid: b.UUID()}
		return f, nil
	case "now":
		f.from = position{uuid: b.UUID(), cas: b.StableCAS()}
		return f, nil
	}
	p, err := parsePosition(req.Since, b.NumPartitions())
	if err != nil {
		return nil, err
	}
	if err := b.CheckCASPosition(p.uuid, max(p.cas, p.win)); err != nil {
		return nil, fmt.Errorf("%w: %w; start again with since=0", ErrRollback, err)
	}
	// A consumer that has read every change up to seen may have missed a
	// deletion the metadata purge removed above it. One that began at 0
	// and is inside its first window has seen the partitions it passed up
	// to the window's top, and needs no deletion of a document it never
	// saw in the others.
	seen := p.cas
	if seen == 0 {
		seen = p.win
	}
	if purged := b.PurgedCAS(); seen != 0 && purged > seen {
		return nil, fmt.Errorf("%w: the metadata purge has removed deletions made after it; start again with since=0", ErrRollback)
	}
	f.from = p
	return f, nil
}

// ContentType is the media type of what Run writes.
func (f *Feed) ContentType() string {
	if f.req.Feed == EventSource {
		return "text/event-stream"
	}
	return "application/json"
}

// Progress returns how many documents the feed has taken from the bucket
// and how many rows it has written: it never takes more than one chunk
// ahead of what it writes.
func (f *Feed) Progress() (read, sent int64) { return f.read.Load(), f.sent.Load() }

// keep is the feed's filter.
func (f *Feed) keep(d *engine.Document) bool {
	if f.keepHook != nil {
		f.keepHook()
	}
	return d.Collection == f.cid && (f.ids == nil || f.ids[d.Key])
}

// Run writes the feed to out until it is done (normal: the changes up to
// now; longpoll: at least one change or the timeout; continuous and
// eventsource: the limit or the timeout), ctx ends (the client went) or a
// write fails. It holds at most a chunk of documents and a buffer of bytes
// for a client that stops reading, and flushes after each chunk. With a
// heartbeat, it sends one whenever nothing has been sent for that long,
// whether it is reading the bucket or waiting for a change.
func (f *Feed) Run(ctx context.Context, out Sink) error {
	w := newWriter(out, f.req.Feed)
	// A heartbeat that cannot be written ends the feed with its error.
	ctx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	stop := w.beat(ctx, f.req.Heartbeat, fail)
	defer stop()
	if f.req.Descending {
		return f.runReverse(ctx, w)
	}
	r := newReader(f.b, f.from, f.keep, chunkSize, f.req.Limit, !f.req.IncludeDocs)
	err := f.run(ctx, r, w)
	if err != nil && !errors.Is(err, errDone) {
		return err
	}
	f.read.Store(r.read)
	return w.finish(r.pos, f.pending(r.pos)) // heartbeats go on while pending counts
}

// errDone ends run without an error.
var errDone = errors.New("changes: done")

func (f *Feed) run(ctx context.Context, r *reader, w *writer) error {
	if err := w.start(); err != nil {
		return err
	}
	limit := f.req.Limit
	if limit == 0 {
		return errDone
	}
	top := f.b.StableCAS()  // a normal feed answers up to the moment it began
	idleSince := time.Now() // wall clock: the feed's timeout
	for {
		if f.req.Feed != Normal {
			top = f.b.StableCAS()
		}
		rows := 0
		if r.open(top) {
			now := f.b.Clock().Now()
			for d := r.next(); d != nil; d = r.next() {
				f.read.Store(r.read)
				if err := w.row(d, r.pos, f.req.IncludeDocs, now); err != nil {
					return err
				}
				rows++
				f.sent.Add(1)
				if limit > 0 && f.sent.Load() == int64(limit) {
					return errDone
				}
				if rows%chunkSize == 0 {
					if ctx.Err() != nil {
						return context.Cause(ctx)
					}
					// Each chunk goes out as it is written: over HTTP a
					// flush is what moves the write deadline on, so a
					// long window that keeps sending is never cut.
					if err := w.flush(); err != nil {
						return err
					}
				}
			}
			if r.err != nil {
				return r.err
			}
		}
		if rows > 0 {
			idleSince = time.Now() // wall clock: the feed's timeout
		}
		if err := w.flush(); err != nil {
			return err
		}
		if f.req.Feed == Normal && r.pos.cas < top {
			// The since was inside a window, whose rest is read: the
			// changes after it, up to the request, are the next window.
			continue
		}
		if f.req.Feed == Normal || (f.req.Feed == Longpoll && f.sent.Load() > 0) {
			return errDone
		}
		if err := f.wait(ctx, r, idleSince); err != nil {
			return err
		}
	}
}

// wait blocks until the bucket has a change past r's position; it returns
// errDone at the timeout, counted from idleSince. The writer's heartbeats,
// if any, go on meanwhile (writer.beat).
func (f *Feed) wait(ctx context.Context, r *reader, idleSince time.Time) error {
	for {
		high := f.b.HighSeqnos()
		if f.b.StableCAS() > r.pos.cas {
			return nil
		}
		wctx, cancel := ctx, context.CancelFunc(func() {})
		if f.req.Timeout >= 0 {
			left := f.req.Timeout - time.Since(idleSince) // wall clock: the feed's timeout
			if left <= 0 {
				return errDone
			}
			wctx, cancel = context.WithTimeout(ctx, left)
		}
		err := f.b.WaitChanges(wctx, high)
		cancel()
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
	}
}

// pending counts the rows after pos that a request from it would send now.
// It scans the bucket unless nothing was written past pos. It is not kept as
// a counter: it counts the distinct documents of one collection (and, with
// doc_ids, of a set of keys) whose current version lies past a CAS
// position, and a rewritten document moves past it again; no count the
// engine keeps answers that. Its cost follows the changes after pos, which
// a limited request leaves unsent.
func (f *Feed) pending(pos position) int64 {
	top := f.b.StableCAS()
	if pos.win <= pos.cas && top <= pos.cas {
		return 0
	}
	r := newReader(f.b, pos, f.keep, chunkSize, 0, true) // a count: no values, no limit
	var n int64
	for range 2 { // the open window, then one up to now
		if !r.open(top) {
			break
		}
		for d := r.next(); d != nil; d = r.next() {
			n++
		}
	}
	return n
}

// runReverse writes a descending feed (Request.Descending): the window
// (0, now] walked backwards, partition by partition from the last (revWalk),
// in any mode's framing, without waiting for changes.
func (f *Feed) runReverse(ctx context.Context, w *writer) error {
	if err := w.start(); err != nil {
		return err
	}
	top := f.b.StableCAS()
	last := position{uuid: f.b.UUID(), cas: top} // with no row: the moment of the request
	limit := f.req.Limit
	if limit == 0 {
		return w.finish(last, f.countWindow(top))
	}
	rw := &revWalk{f: f, top: top, marks: f.marks}
	if rw.marks <= 0 {
		rw.marks = reverseMarks
	}
	now := f.b.Clock().Now()
	var sent int64
	emit := func(r *revRow) (bool, error) {
		if err := w.row(r.d, r.pos, f.req.IncludeDocs, now); err != nil {
			return false, err
		}
		last = r.pos
		sent++
		f.sent.Store(sent)
		f.read.Store(rw.read)
		if limit > 0 && sent == int64(limit) {
			return false, nil
		}
		if sent%chunkSize == 0 {
			if ctx.Err() != nil {
				return false, context.Cause(ctx)
			}
			if err := w.flush(); err != nil {
				return false, err
			}
		}
		return true, nil
	}
	complete := true
	for part := f.b.NumPartitions() - 1; part >= 0 && top > 0; part-- {
		more, err := rw.partition(ctx, part, emit)
		if err != nil {
			return err
		}
		if !more {
			complete = false
			break
		}
	}
	f.read.Store(rw.read)
	f.peak = rw.peak
	var pending int64
	if !complete {
		pending = max(f.countWindow(top)-sent, 0)
	}
	return w.finish(last, pending)
}

// countWindow counts the rows a forward read from 0 up to top sends (a
// descending feed's pending is what of them it did not send).
func (f *Feed) countWindow(top uint64) int64 {
	r := newReader(f.b, position{uuid: f.b.UUID()}, f.keep, chunkSize, 0, true) // a count: no values
	var n int64
	if r.open(top) {
		for d := r.next(); d != nil; d = r.next() {
			n++
		}
	}
	return n
}

// writer encodes the feed in its mode's framing. Two goroutines call it,
// the feed's and its heartbeat's (beat): each writes whole rows or
// heartbeats under mu.
type writer struct {
	mu    sync.Mutex
	bw    *bufio.Writer
	out   Sink
	mode  Mode
	first bool // a normal or longpoll answer has written a row
	buf   []byte
	// lastSent is when bytes last went to out (a full buffer, a flush,
	// a heartbeat): a heartbeat is due once none have for its period.
	lastSent time.Time
	// ended says finish has written the answer's end: no heartbeat after.
	ended bool
}

func newWriter(out Sink, mode Mode) *writer {
	w := &writer{out: out, mode: mode, lastSent: time.Now()} // wall clock: the heartbeat
	w.bw = bufio.NewWriterSize(sentWriter{w}, bufferSize)
	return w
}

// sentWriter is what a writer's buffer writes to: out, noting when.
type sentWriter struct{ w *writer }

func (s sentWriter) Write(p []byte) (int, error) {
	s.w.lastSent = time.Now() // wall clock: the heartbeat; under w.mu, as every write to bw
	return s.w.out.Write(p)
}

// beat sends a heartbeat whenever nothing has been sent for every, while the
// feed reads the bucket (a long filtered scan, a backfill) or waits for a
// change, until ctx ends or the stop function it returns is called (which
// returns once beat has stopped). A heartbeat that fails cancels the feed
// with its error (fail). With every 0 it does nothing.
func (w *writer) beat(ctx context.Context, every time.Duration, fail context.CancelCauseFunc) (stop func()) {
	if every <= 0 {
		return func() {}
	}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTimer(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-quit:
				return
			case <-t.C:
			}
			w.mu.Lock()
			left := every - time.Since(w.lastSent) // wall clock: the heartbeat
			var err error
			if left <= 0 {
				err = w.heartbeatLocked()
				left = every
			}
			w.mu.Unlock()
			if err != nil {
				fail(err)
				return
			}
			t.Reset(left)
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}

// start writes the answer's head and sends it at once (over HTTP with the
// response's headers, and the first move of the write deadline).
func (w *writer) start() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mode == Normal || w.mode == Longpoll {
		if _, err := w.bw.WriteString("{\"results\":[\n"); err != nil {
			return err
		}
	}
	return w.flushLocked()
}

// row writes one change: {"seq","id","changes":[{"rev"}],"deleted"?,"expired"?,"doc"?}.
func (w *writer) row(d *engine.Document, pos position, includeDocs bool, now int64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	seq := pos.String()
	b := w.buf[:0]
	switch w.mode {
	case Normal, Longpoll:
		if w.first {
			b = append(b, ",\n"...)
		}
		w.first = true
	case EventSource:
		b = append(b, "data: "...)
	}
	b = append(b, `{"seq":"`...)
	b = append(b, seq...)
	b = append(b, `","id":`...)
	b = appendString(b, d.Key)
	b = append(b, `,"changes":[{"rev":"`...)
	b = append(b, d.Rev()...)
	b = append(b, `"}]`...)
	if d.Deleted {
		b = append(b, `,"deleted":true`...)
		if d.Expired {
			b = append(b, `,"expired":true`...)
		}
	}
	if includeDocs {
		b = append(b, `,"doc":`...)
		b = appendDoc(b, d, now)
	}
	b = append(b, '}')
	switch w.mode {
	case Continuous:
		b = append(b, '\n')
	case EventSource:
		b = append(b, "\nid: "...)
		b = append(b, seq...)
		b = append(b, "\n\n"...)
	}
	w.buf = b
	if cap(w.buf) > bufferSize {
		w.buf = nil // a large document's row: do not keep its buffer
	}
	_, err := w.bw.Write(b)
	return err
}

// heartbeatLocked sends a newline (an event in eventsource): whitespace
// between a normal or longpoll answer's rows, an empty line in continuous.
//
// REQUIRES: w.mu held.
func (w *writer) heartbeatLocked() error {
	if w.ended {
		return nil
	}
	s := "\n"
	if w.mode == EventSource {
		s = "event: heartbeat\ndata: \n\n"
	}
	if _, err := w.bw.WriteString(s); err != nil {
		return err
	}
	return w.flushLocked()
}

// flush sends what is buffered.
func (w *writer) flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.flushLocked()
}

// flushLocked is flush with w.mu held.
func (w *writer) flushLocked() error {
	if err := w.bw.Flush(); err != nil {
		return err
	}
	return w.out.Flush()
}

// finish writes the answer's end: last_seq and pending.
func (w *writer) finish(pos position, pending int64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ended = true
	var s string
	tail := `"last_seq":"` + pos.String() + `","pending":` + strconv.FormatInt(pending, 10) + "}\n"
	switch w.mode {
	case Normal, Longpoll:
		s = "],\n" + tail
		if w.first {
			s = "\n" + s
		}
	case Continuous:
		s = "{" + tail
	}
	if _, err := w.bw.WriteString(s); err != nil {
		return err
	}
	return w.flushLocked()
}

// appendDoc appends a row's doc: the document in CouchDB's shape
// (AppendCouchDoc); for a deletion (an expiration included) CouchDB's
// tombstone, {"_id","_rev","_deleted":true}; null for a document expired
// but not yet deleted (its row is not a deletion yet, and its body is no
// longer readable).
func appendDoc(b []byte, d *engine.Document, now int64) []byte {
	switch {
	case d.Deleted:
		b = append(b, `{"_id":`...)
		b = appendString(b, d.Key)
		b = append(b, `,"_rev":"`...)
		b = append(b, d.Rev()...)
		return append(b, `","_deleted":true}`...)
	case d.ExpiredAt(now):
		return append(b, "null"...)
	}
	return AppendCouchDoc(b, d)
}

// AppendCouchDoc appends d as CouchDB shows a document: its JSON object with
// _id and _rev set (replacing any the body holds), {"_id","_rev","json"}
// for another JSON value, {"_id","_rev","base64"} for a binary one. The
// change feed's include_docs and _all_docs both answer with it.
func AppendCouchDoc(b []byte, d *engine.Document) []byte {
	head := func(b []byte) []byte {
		b = append(b, `{"_id":`...)
		b = appendString(b, d.Key)
		b = append(b, `,"_rev":"`...)
		b = append(b, d.Rev()...)
		return append(b, '"')
	}
	if d.Type != engine.TypeJSON {
		b = append(head(b), `,"base64":`...)
		// []byte marshals as a base64 string, a nil one (an empty value)
		// as null: an empty value is "".
		v, _ := json.Marshal(append([]byte{}, d.Value...))
		return append(append(b, v...), '}')
	}
	v := gjson.ParseBytes(d.Value)
	if !v.IsObject() {
		b = append(head(b), `,"json":`...)
		return append(append(b, d.Value...), '}')
	}
	b = head(b)
	if v.Get("_id").Exists() || v.Get("_rev").Exists() {
		// The body names itself: copy its other members one by one.
		v.ForEach(func(k, m gjson.Result) bool {
			if k.Str != "_id" && k.Str != "_rev" {
				b = append(b, ',')
				b = append(b, k.Raw...)
				b = append(b, ':')
				b = append(b, m.Raw...)
			}
			return true
		})
		return append(b, '}')
	}
	inner := v.Raw[1:] // v.Raw starts at the object's '{'
	empty := true
	v.ForEach(func(_, _ gjson.Result) bool {
		empty = false
		return false
	})
	if !empty {
		b = append(b, ',')
	}
	return append(b, inner...)
}

// appendString appends s as a JSON string.
func appendString(b []byte, s string) []byte {
	v, _ := json.Marshal(s) // a string always marshals
	return append(b, v...)
}
