package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/tidwall/gjson"

	"github.com/mayflydb/mayfly/internal/jsonstr"
	"github.com/mayflydb/mayfly/views"
)

// Shares as streams. A coverer's share of a view query or of an _all_docs
// listing travels as one JSON object, {"total_rows":N,"rows":[ROW,...]}
// (a listing's share of keys adds "desc":true when its rows come last key
// first), the format shares have always had: the head first, then the
// rows. A coverer writes it as it walks its index or store, through a
// bounded buffer, and the node asked reads it as it arrives, a row at a
// time (shareReader), merging as it goes, so that neither side holds a
// share. The bytes are the same as a whole share's, so a node of the
// previous build, which builds its share whole and reads one whole, and a
// node of this one understand each other during a rolling upgrade.
//
// A coverer that fails after its head was sent cannot change its status
// any more: it ends its answer without the closing "]}" (no JSON parser
// takes it for whole, a previous build's included) and says why in the
// trailer shareErrorTrailer; the node asked names it in the answer's
// errors.

// shareErrorTrailer is the HTTP trailer in which a coverer whose share
// failed part way says why.
const shareErrorTrailer = "X-Mayfly-Share-Error"

// shareReduceErrorTrailer is the HTTP trailer in which a coverer whose
// share failed part way because its reduce failed (views.ErrReduce) gives
// the error's code ("error", "reduce_error", ...), shareErrorTrailer then
// holding its reason as a client is shown it: the node asked fails the
// whole query with them, as one node does, rather than name the coverer
// in the answer's errors. A node of the previous build reads no such
// trailer and names the coverer with the reason.
const shareReduceErrorTrailer = "X-Mayfly-Share-Reduce-Error"

// maxShareRow bounds one row of a share, in bytes (a row holds at most a
// document, with include_docs, of at most 20 MiB).
const maxShareRow = 64 << 20

// errShareTimedOut cancels a share request whose coverer kept the node
// asked waiting past connection_timeout.
var errShareTimedOut = errors.New("the node did not answer within connection_timeout")

// beginShare starts a share's answer: its status, and its head up to the
// rows' opening bracket. extra is more of the head (`,"desc":true`), or "".
func beginShare(w http.ResponseWriter, total int64, extra string) []byte {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Trailer", shareErrorTrailer+", "+shareReduceErrorTrailer)
	w.WriteHeader(http.StatusOK)
	return []byte(`{"total_rows":` + strconv.FormatInt(total, 10) + extra + `,"rows":[`)
}

// shareWriter is what a share's rows are written through: each write to
// the node asked must make progress within idle (the query's
// connection_timeout), else it fails and the share ends. The node asked
// reads a share only as its merge needs the next row, at its own client's
// pace; without this, a client that stops reading would hold this node's
// share slot and index snapshot until the server's --write-timeout (10
// minutes), and enough of them would leave every other query's shares
// queued. The node asked names the share as failed, as any share cut off.
func shareWriter(w http.ResponseWriter, idle time.Duration) io.Writer {
	return &idleWriter{w: w, rc: http.NewResponseController(w), idle: idle}
}

// idleWriter is shareWriter's writer.
type idleWriter struct {
	w    http.ResponseWriter
	rc   *http.ResponseController
	idle time.Duration
}

// Write moves the connection's write deadline idle ahead, then writes.
func (iw *idleWriter) Write(b []byte) (int, error) {
	_ = iw.rc.SetWriteDeadline(time.Now().Add(iw.idle)) // wall clock: a network deadline; a writer that cannot set one writes without
	return iw.w.Write(b)
}

// failShare ends a share's answer that failed after its head: the closing
// bracket left out, and err in the trailer (a reduce error's code and
// reason in the trailers remoteShare.next reads them from).
func failShare(w http.ResponseWriter, err error) {
	var re *views.ReduceError
	if errors.As(err, &re) {
		w.Header().Set(shareReduceErrorTrailer, re.Code)
		w.Header().Set(shareErrorTrailer, string(jsonstr.Append(nil, re.Reason)))
		return
	}
	w.Header().Set(shareErrorTrailer, string(jsonstr.Append(nil, err.Error())))
}

// shareReader reads a share's answer as it arrives: its head (total_rows,
// desc) up to the rows' opening bracket, then one row a call, each the raw
// JSON of one element of "rows", in a buffer of its own that holds at
// least a row and grows to hold the largest (up to maxShareRow).
type shareReader struct {
	src   io.Reader
	buf   []byte
	r, w  int   // unread bytes: buf[r:w]
	err   error // src's error, once it returned one (io.EOF at its end)
	total int64 // the head's total_rows
	desc  bool  // the head's desc
	ended bool  // the rows' closing bracket was read
	// The scan of the value at buf[r:], resumed after each read.
	scan valueScan
}

// valueScan is the state of a scan for the end of one JSON value.
type valueScan struct {
	off    int // bytes of the value scanned, from its start
	depth  int
	inStr  bool
	esc    bool
	scalar bool // a number, true, false or null: it ends at a delimiter
	end    int  // the value's length once found (0 before)
}

// fill reads more of the source into the buffer, moving the unread bytes to
// its start and growing it when they fill it.
func (s *shareReader) fill() error {
	if s.err != nil {
		return s.err
	}
	if s.r > 0 {
		s.w = copy(s.buf, s.buf[s.r:s.w])
		s.r = 0
	}
	if s.w == len(s.buf) {
		if len(s.buf) >= maxShareRow {
			return fmt.Errorf("a row of the node's answer is over %d bytes", maxShareRow)
		}
		s.buf = append(s.buf, make([]byte, max(len(s.buf), 16<<10))...)
		s.buf = s.buf[:cap(s.buf)]
	}
	n, err := s.src.Read(s.buf[s.w:])
	s.w += n
	if err != nil {
		s.err = err
		if n > 0 {
			return nil
		}
	}
	return err
}

// skipSpace passes over white space (and, with comma, one comma and the
// white space around it), reading as needed; it returns the next byte,
// unread. With noWait it reads nothing, and ok is false when the buffer
// ends first.
func (s *shareReader) skipSpace(comma, noWait bool) (c byte, ok bool, err error) {
	for {
		for ; s.r < s.w; s.r++ {
			switch c := s.buf[s.r]; c {
			case ' ', '\t', '\r', '\n':
			case ',':
				if !comma {
					return c, true, nil
				}
				comma = false
			default:
				return c, true, nil
			}
		}
		if noWait {
			return 0, false, nil
		}
		if err := s.fill(); err != nil {
			return 0, false, s.cut(err)
		}
	}
}

// cut names a source error met in the middle of the answer.
func (s *shareReader) cut(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// scanValue looks for the end of the JSON value at buf[r:], from where the
// last scan stopped; ok is false when the buffer ends first.
func (s *shareReader) scanValue() (end int, ok bool) {
	v := &s.scan
	if v.end > 0 {
		return v.end, true
	}
	v.end = s.valueEnd()
	return v.end, v.end > 0
}

// valueEnd is scanValue's scan: the value's length, or 0.
func (s *shareReader) valueEnd() int {
	v := &s.scan
	data := s.buf[s.r:s.w]
	if v.off == 0 && len(data) > 0 {
		switch data[0] {
		case '"':
			v.inStr = true
		case '{', '[':
			v.depth = 1
		default:
			v.scalar = true
		}
		v.off = 1
	}
	for ; v.off < len(data); v.off++ {
		c := data[v.off]
		switch {
		case v.inStr:
			switch {
			case v.esc:
				v.esc = false
			case c == '\\':
				v.esc = true
			case c == '"':
				v.inStr = false
				if v.depth == 0 {
					return v.off + 1
				}
			}
		case v.scalar:
			switch c {
			case ',', ']', '}', ' ', '\t', '\r', '\n':
				return v.off
			}
		case c == '"':
			v.inStr = true
		case c == '{' || c == '[':
			v.depth++
		case c == '}' || c == ']':
			v.depth--
			if v.depth == 0 {
				return v.off + 1
			}
		}
	}
	if v.scalar && s.err == io.EOF && len(data) > 0 {
		return len(data)
	}
	return 0
}

// value reads one JSON value, whole (valid until the next read). A scan
// ready began is resumed (the scan is of the value at r, and r moves only
// once a value is read, when the scan starts again).
func (s *shareReader) value() ([]byte, error) {
	if _, _, err := s.skipSpace(false, false); err != nil {
		return nil, err
	}
	for {
		if end, ok := s.scanValue(); ok {
			v := s.buf[s.r : s.r+end]
			s.r += end
			s.scan = valueScan{}
			return v, nil
		}
		if err := s.fill(); err != nil {
			return nil, s.cut(err)
		}
	}
}

// expect reads the byte c, after white space.
func (s *shareReader) expect(c byte) error {
	got, _, err := s.skipSpace(false, false)
	if err != nil {
		return err
	}
	if got != c {
		return fmt.Errorf("the node's answer is not a share: %q where %q was due", got, c)
	}
	s.r++
	return nil
}

// head reads the answer's head, up to the rows' opening bracket: its
// members before "rows" (total_rows, desc; others are passed over).
func (s *shareReader) head() error {
	if err := s.expect('{'); err != nil {
		return err
	}
	for {
		c, _, err := s.skipSpace(true, false)
		if err != nil {
			return err
		}
		if c != '"' {
			return errors.New("the node's answer has no rows before its end")
		}
		k, err := s.value()
		if err != nil {
			return err
		}
		name := string(k)
		if err := s.expect(':'); err != nil {
			return err
		}
		if name == `"rows"` {
			return s.expect('[')
		}
		v, err := s.value()
		if err != nil {
			return err
		}
		switch name {
		case `"total_rows"`:
			s.total = gjson.ParseBytes(v).Int()
		case `"desc"`:
			s.desc = string(v) == "true"
		}
	}
}

// row reads the next row, or io.EOF after the last (the rows' closing
// bracket); an answer that ends before is io.ErrUnexpectedEOF (or the
// source's error).
func (s *shareReader) row() ([]byte, error) {
	if s.ended {
		return nil, io.EOF
	}
	c, _, err := s.skipSpace(true, false)
	if err != nil {
		return nil, err
	}
	if c == ']' {
		s.r++
		s.ended = true
		// The members after the rows and the object's end: a share cut
		// short lacks them, and so fails here.
		for {
			c, _, err := s.skipSpace(true, false)
			if err != nil {
				return nil, err
			}
			if c == '}' {
				return nil, io.EOF
			}
			if _, err := s.value(); err != nil { // a member's name
				return nil, err
			}
			if err := s.expect(':'); err != nil {
				return nil, err
			}
			if _, err := s.value(); err != nil {
				return nil, err
			}
		}
	}
	return s.value()
}

// ready says whether the next row (or the end of the rows) is in the
// buffer: row would return without reading.
func (s *shareReader) ready() bool {
	if s.ended {
		return true
	}
	c, ok, _ := s.skipSpace(true, true)
	if !ok {
		return s.err != nil // the source has ended: row returns at once
	}
	if c == ']' {
		return true // close enough: the object's end is a few bytes on
	}
	_, ok = s.scanValue()
	return ok
}

// remoteShare is a share being read from its coverer.
type remoteShare struct {
	from  string
	resp  *http.Response
	rd    *shareReader
	idle  *time.Timer
	wait  time.Duration
	ctx   context.Context
	close context.CancelCauseFunc
}

// Close ends the share's request.
func (r *remoteShare) Close() {
	r.idle.Stop()
	r.close(context.Canceled)
	r.resp.Body.Close()
}

// Read reads the share's body, the idle timer running while it waits: a
// coverer that keeps the node asked waiting past connection_timeout, at
// any point of its answer, is given up on (req_timedout).
func (r *remoteShare) Read(p []byte) (int, error) {
	r.idle.Reset(r.wait)
	n, err := r.resp.Body.Read(p)
	r.idle.Stop()
	return n, err
}

// next reads the share's next row; a failure is a *views.NodeError naming
// the coverer and why: the reason in its trailer, or the transport's; or,
// when the coverer's reduce failed, a *views.ReduceError with its code
// and reason (views.ErrReduce: the query fails, see views.MergeSources).
func (r *remoteShare) next() ([]byte, error) {
	row, err := r.rd.row()
	if err == nil || err == io.EOF {
		return row, err
	}
	reason := transportReason(r.ctx, err)
	if errors.Is(err, io.ErrUnexpectedEOF) {
		reason = "the node's answer ended before its rows did"
		if t := r.resp.Trailer.Get(shareErrorTrailer); t != "" {
			reason = gjson.Parse(t).String()
			if code := r.resp.Trailer.Get(shareReduceErrorTrailer); code != "" {
				return nil, remoteReduceError(code, reason)
			}
		}
	}
	return nil, &views.NodeError{From: r.from, Reason: reason}
}

// ready says whether next would return without waiting.
func (r *remoteShare) ready() bool { return r.rd.ready() }
