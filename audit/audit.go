package audit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// FileName is the audit log's usual name inside the data directory.
const FileName = "audit.log"

// Genesis is hashed to give the first line's prev.
const Genesis = "mayfly audit log v1"

// GenesisHash is the hex SHA-256 of Genesis: the first line's prev.
var GenesisHash = hashLine([]byte(Genesis))

// Actions. Callers may use others; these are the ones Mayfly writes.
const (
	ActionBucketCreate      = "bucket.create"
	ActionBucketDelete      = "bucket.delete"
	ActionBucketSettings    = "bucket.settings"
	ActionScopeCreate       = "scope.create"
	ActionCollectionCreate  = "collection.create"
	ActionScopeDrop         = "scope.drop"
	ActionSearchIndexPut    = "search.index.put"
	ActionSearchIndexDelete = "search.index.delete"
	ActionCollectionDrop    = "collection.drop"
	ActionDDocPut           = "ddoc.put"
	ActionDDocDelete        = "ddoc.delete"
	ActionPagerSettings     = "pager.settings"
	ActionUserPut           = "user.put"
	ActionUserDelete        = "user.delete"
	ActionLoginFailed       = "login.failed"
	ActionFlushAll          = "memcached.flush_all"
	ActionBucketFlush       = "bucket.flush"
	// ActionTorn marks a torn last line sealed by Open (written by the
	// package itself).
	ActionTorn = "audit.torn"
)

// Outcomes. An Event without one is an intent: recorded before the action,
// which is then done unless a later line with Outcome OutcomeFailed and Ref
// equal to its Seq says otherwise.
const (
	OutcomeFailed = "failed"
)

// Event is one audited action, one JSON line.
type Event struct {
	// Seq is the line number in the file (1-based). Record sets it.
	Seq int64 `json:"seq"`
	// Prev is the hex SHA-256 of the previous line (GenesisHash on the first
	// line). Record sets it.
	Prev string `json:"prev"`
	// Time is when the action was asked for, in Unix seconds, from the
	// caller's clock (the engine clock).
	Time int64 `json:"time"`
	// User is who asked ("" for the command line, the server itself, or a
	// protocol without users, such as memcached's).
	User string `json:"user"`
	// Remote is the client's address, "" for the command line or the server.
	Remote string `json:"remote"`
	// Action names what was done: one of the Action constants.
	Action string `json:"action"`
	// Bucket is the bucket acted on ("" for a server-wide action).
	Bucket string `json:"bucket"`
	// Target names what inside the bucket or server was acted on: the scope,
	// "scope.collection", the design document, the user.
	Target string `json:"target"`
	// Before is the state before the action (null when it did not exist); it
	// must encode as JSON.
	Before any `json:"before"`
	// After is the state the action asks for (null for a deletion); it must
	// encode as JSON.
	After any `json:"after"`
	// Outcome is "" for an intent, OutcomeFailed on the follow-up line of an
	// intent whose action then failed.
	Outcome string `json:"outcome,omitempty"`
	// Ref is, on a follow-up line, the Seq of the intent it settles.
	Ref int64 `json:"ref,omitempty"`
	// Error is, on a failed follow-up line, why the action failed.
	Error string `json:"error,omitempty"`
}

// Torn describes a torn last line that Open sealed.
type Torn struct {
	// Line is the first line skipped (or the unterminated record's line).
	Line int64
	// Lines is how many lines were skipped (0 when the unterminated line was
	// a whole record kept in the chain).
	Lines int
	// Bytes is how many bytes were skipped.
	Bytes int
	// Marker is the Seq of the audit.torn record Open appended.
	Marker int64
}

// Log appends Events to a file as hash-chained JSON lines. It is safe for
// concurrent use; records are written whole, one at a time, in the order
// Record is called. A nil *Log ignores records.
type Log struct {
	path string
	torn *Torn

	mu struct {
		sync.Mutex
		f      *os.File // nil once closed
		seq    int64    // the last line's number
		prev   string   // the hash of the last record line
		broken error    // set by a failed write or sync
	}
}

// Open opens the audit log at path for appending, creating the file (mode
// 0600) if needed, and continues the chain from its last line; a torn last
// line is sealed (see the package documentation and Log.Torn). The directory
// must exist.
func Open(path string) (*Log, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit: open: %w", err)
	}
	l := &Log{path: path}
	l.mu.f = f
	if err := l.resume(); err != nil {
		f.Close()
		return nil, err
	}
	return l, nil
}

// Path returns the file the log appends to ("" for a nil Log).
func (l *Log) Path() string {
	if l == nil {
		return ""
	}
	return l.path
}

// Torn returns what Open sealed, or nil if the file ended whole.
func (l *Log) Torn() *Torn {
	if l == nil {
		return nil
	}
	return l.torn
}

// record is what Open needs of a line: its place in the chain.
type record struct {
	Seq    *int64 `json:"seq"`
	Prev   string `json:"prev"`
	Action string `json:"action"`
}

// parseRecord decodes a line as a record, false if it is not one.
func parseRecord(line []byte) (record, bool) {
	var r record
	if err := json.Unmarshal(line, &r); err != nil || r.Seq == nil || len(r.Prev) != 64 || r.Action == "" {
		return r, false
	}
	return r, true
}

func hashLine(line []byte) string {
	h := sha256.Sum256(line)
	return hex.EncodeToString(h[:])
}

// lineBefore returns the line that ends just before end (a newline at end-1
// excluded from it, if there is one): its start offset and bytes.
func lineBefore(f *os.File, end int64) (int64, []byte, error) {
	const chunk = 64 << 10
	var buf []byte
	pos := end
	for pos > 0 {
		n := min(int64(chunk), pos)
		b := make([]byte, n)
		if _, err := f.ReadAt(b, pos-n); err != nil {
			return 0, nil, err
		}
		pos -= n
		buf = append(b, buf...)
		if i := bytes.LastIndexByte(buf, '\n'); i >= 0 {
			return pos + int64(i) + 1, buf[i+1:], nil
		}
	}
	return 0, buf, nil
}

// resume reads the end of the file to continue the chain, sealing a torn
// last line.
func (l *Log) resume() error {
	f := l.mu.f
	l.mu.prev = GenesisHash
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("audit: open: %w", err)
	}
	size := fi.Size()
	if size == 0 {
		return nil
	}
	var last [1]byte
	if _, err := f.ReadAt(last[:], size-1); err != nil {
		return fmt.Errorf("audit: open: %w", err)
	}
	if last[0] == '\n' {
		_, line, err := lineBefore(f, size-1)
		if err != nil {
			return fmt.Errorf("audit: open: %w", err)
		}
		r, ok := parseRecord(line)
		if !ok {
			return fmt.Errorf("%w: %s: the last line is not a record; move the file aside to start a new log", ErrCorrupt, l.path)
		}
		l.mu.seq, l.mu.prev = *r.Seq, hashLine(line)
		return nil
	}
	// Torn: follow the chain through the whole lines before the tail.
	tailStart, tail, err := lineBefore(f, size)
	if err != nil {
		return fmt.Errorf("audit: open: %w", err)
	}
	v := verifier{rep: Report{Head: GenesisHash}}
	br := newLineReader(io.NewSectionReader(f, 0, tailStart))
	for {
		line, err := br.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("audit: open: %w", err)
		}
		if err := v.feed(line); err != nil {
			return fmt.Errorf("%w: %s: the chain is broken before the torn last line: %w; move the file aside to start a new log", ErrCorrupt, l.path, err)
		}
	}
	now := time.Now().Unix() // wall clock: the torn-line marker is written at open, before any engine clock exists
	nlines := int64(v.rep.Lines)
	if r, ok := parseRecord(tail); ok && *r.Seq == nlines+1 && r.Prev == v.rep.Head && (v.pending == nil || v.vouches(r, tail)) {
		// Only the newline was lost: the record stays in the chain.
		l.mu.seq, l.mu.prev = *r.Seq, hashLine(tail)
		l.torn = &Torn{Line: *r.Seq, Marker: *r.Seq + 1}
		return l.seal(Event{Time: now, Action: ActionTorn, After: map[string]int64{"unterminated": *r.Seq}})
	}
	if _, ok := parseRecord(tail); ok || v.pendingRecord {
		// A crash leaves fragments, not records out of the chain.
		why := v.pendingFirst
		if why == nil {
			why = &ChainError{Line: int(nlines) + 1, Reason: "a record out of the chain"}
		}
		return fmt.Errorf("%w: %s: the chain is broken before the torn last line: %w; move the file aside to start a new log", ErrCorrupt, l.path, why)
	}
	skipped := append(append(v.pending, tail...), '\n')
	lines := v.pendingLines + 1
	l.mu.seq, l.mu.prev = nlines+1, v.rep.Head
	l.torn = &Torn{Line: nlines + 2 - int64(lines), Lines: lines, Bytes: len(skipped), Marker: l.mu.seq + 1}
	return l.seal(Event{Time: now, Action: ActionTorn, After: map[string]any{
		"skipped_lines": lines, "skipped_bytes": len(skipped), "skipped_sha256": hashLine(skipped)}})
}

// seal terminates the torn line and appends the marker in one write.
func (l *Log) seal(e Event) error {
	line, err := l.encodeLocked(&e)
	if err != nil {
		return err
	}
	if err := l.appendLocked(append([]byte{'\n'}, line...)); err != nil {
		return err
	}
	l.commitLocked(line)
	return nil
}

// encodeLocked numbers e and encodes it as a line, newline included.
func (l *Log) encodeLocked(e *Event) ([]byte, error) {
	e.Seq, e.Prev = l.mu.seq+1, l.mu.prev
	line, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("audit: encode %s: %w", e.Action, err)
	}
	return append(line, '\n'), nil
}

// appendLocked writes b and syncs; a failure breaks the log.
func (l *Log) appendLocked(b []byte) error {
	if _, err := l.mu.f.Write(b); err != nil {
		l.mu.broken = fmt.Errorf("%w: write %s: %w", ErrBroken, l.path, err)
		return l.mu.broken
	}
	if err := l.mu.f.Sync(); err != nil {
		l.mu.broken = fmt.Errorf("%w: sync %s: %w", ErrBroken, l.path, err)
		return l.mu.broken
	}
	return nil
}

// commitLocked advances the chain past line (newline included).
func (l *Log) commitLocked(line []byte) {
	l.mu.seq++
	l.mu.prev = hashLine(line[:len(line)-1])
}

// Record appends e as one line of the chain (setting its Seq and Prev) and
// syncs the file before returning. It returns ctx's error without writing if
// ctx has already ended, an error if Before or After cannot be encoded,
// ErrClosed after Close, and an error wrapping ErrBroken once a write or sync
// has failed. On a nil Log it does nothing.
func (l *Log) Record(ctx context.Context, e Event) error {
	_, err := l.record(ctx, e)
	return err
}

func (l *Log) record(ctx context.Context, e Event) (int64, error) {
	if l == nil {
		return 0, nil
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if e.Action == "" {
		return 0, errors.New("audit: an event needs an action")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.f == nil {
		return 0, ErrClosed
	}
	if l.mu.broken != nil {
		return 0, l.mu.broken
	}
	line, err := l.encodeLocked(&e)
	if err != nil {
		return 0, err
	}
	if err := l.appendLocked(line); err != nil {
		return 0, err
	}
	l.commitLocked(line)
	return e.Seq, nil
}

// Intent is a recorded intent, to settle once the action is tried.
type Intent struct {
	l *Log
	e Event
}

// Intend records e as the intent of an action about to be done: the action
// must be done only if Intend returns nil, and then its outcome reported to
// Intent.Failed if it fails.
func (l *Log) Intend(ctx context.Context, e Event) (Intent, error) {
	seq, err := l.record(ctx, e)
	e.Seq = seq
	return Intent{l: l, e: e}, err
}

// Failed records that the intended action failed with cause: a follow-up
// line with the intent's action, bucket and target, Outcome OutcomeFailed
// and Ref the intent's Seq. It does nothing if cause is nil or the Log is
// nil. Its own error (the log broken meanwhile) can only be reported: the
// action already did not happen.
func (i Intent) Failed(ctx context.Context, cause error) error {
	if cause == nil || i.l == nil {
		return nil
	}
	e := i.e
	e.Before, e.After = nil, nil
	e.Outcome, e.Ref, e.Error = OutcomeFailed, i.e.Seq, cause.Error()
	return i.l.Record(context.WithoutCancel(ctx), e)
}

// Seq is the intent's line number (0 on a nil Log).
func (i Intent) Seq() int64 { return i.e.Seq }

// Close closes the file. Later Records return ErrClosed; Close may be called
// more than once, and on a nil Log.
func (l *Log) Close() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.f == nil {
		return nil
	}
	err := l.mu.f.Close()
	l.mu.f = nil
	if err != nil {
		return fmt.Errorf("audit: close %s: %w", l.path, err)
	}
	return nil
}

// Report is what Verify found in a whole log.
type Report struct {
	// Records is the number of records, torn markers included.
	Records int
	// Lines is the number of lines (records and skipped torn lines).
	Lines int
	// Head is the hex SHA-256 of the last record line (GenesisHash for an
	// empty log): note it elsewhere to detect a later truncation.
	Head string
	// Torn lists the line numbers of the audit.torn markers.
	Torn []int64
}

// tornAfter is an audit.torn marker's after.
type tornAfter struct {
	Lines  int    `json:"skipped_lines"`
	Bytes  int    `json:"skipped_bytes"`
	SHA256 string `json:"skipped_sha256"`
}

// Verify reads a whole audit log and checks its chain. It returns a
// *ChainError naming the first line that breaks it (a removed, edited or
// reordered line; a torn last line not yet sealed by Open), or the reader's
// error.
func Verify(r io.Reader) (Report, error) {
	var v verifier
	v.rep.Head = GenesisHash
	br := newLineReader(r)
	for {
		line, err := br.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return v.rep, err
		}
		if line[len(line)-1] != '\n' {
			if v.pendingFirst != nil {
				return v.rep, v.pendingFirst
			}
			return v.rep, &ChainError{Line: v.rep.Lines + 1, Reason: "torn last line (a crash mid-write); the next Open seals it"}
		}
		if err := v.feed(line); err != nil {
			return v.rep, err
		}
	}
	if v.pendingFirst != nil {
		return v.rep, v.pendingFirst
	}
	return v.rep, nil
}

// verifier follows the chain line by line.
type verifier struct {
	rep          Report
	pending      []byte // skipped lines since the last record, newlines included
	pendingLines int
	pendingFirst *ChainError // why the first skipped line is not a record
	// pendingRecord says a skipped line is a record out of the chain: a
	// torn marker never vouches for one, as a crash leaves only fragments.
	pendingRecord bool
}

// feed takes the next whole line (newline included). Lines that do not
// continue the chain are held as pending until a torn marker vouches for
// them; feed fails when a record arrives that does not.
func (v *verifier) feed(line []byte) error {
	v.rep.Lines++
	n := int64(v.rep.Lines)
	body := line[:len(line)-1]
	rec, ok := parseRecord(body)
	why := ""
	switch {
	case !ok:
		why = "not an audit record"
	case *rec.Seq != n:
		why = fmt.Sprintf("seq %d on line %d (a line was removed, added or moved)", *rec.Seq, n)
	case rec.Prev != v.rep.Head:
		why = fmt.Sprintf("prev does not match the hash of line %d (it was edited, or a line was removed or moved)", n-1)
	}
	if why == "" && v.pending != nil {
		// Skipped lines are accepted only when a torn marker vouches for them.
		if !v.vouches(rec, body) {
			return v.pendingFirst
		}
	}
	if why != "" {
		if v.pendingFirst == nil {
			v.pendingFirst = &ChainError{Line: int(n), Reason: why}
		}
		v.pending = append(v.pending, line...)
		v.pendingLines++
		v.pendingRecord = v.pendingRecord || ok
		return nil
	}
	v.pending, v.pendingLines, v.pendingFirst, v.pendingRecord = nil, 0, nil, false
	if rec.Action == ActionTorn {
		v.rep.Torn = append(v.rep.Torn, n)
	}
	v.rep.Records++
	v.rep.Head = hashLine(body)
	return nil
}

// vouches says whether a chained record is the torn marker of the pending
// lines.
func (v *verifier) vouches(rec record, body []byte) bool {
	var m struct {
		After tornAfter `json:"after"`
	}
	json.Unmarshal(body, &m)
	return rec.Action == ActionTorn && !v.pendingRecord && m.After.Lines == v.pendingLines && m.After.Bytes == len(v.pending) && m.After.SHA256 == hashLine(v.pending)
}

// lineReader returns a reader's lines, newline included (the last one may
// have none), however long.
type lineReader struct {
	r   io.Reader
	buf []byte
	eof bool
}

func newLineReader(r io.Reader) *lineReader { return &lineReader{r: r} }

func (lr *lineReader) next() ([]byte, error) {
	for {
		if i := bytes.IndexByte(lr.buf, '\n'); i >= 0 {
			line := lr.buf[: i+1 : i+1]
			lr.buf = lr.buf[i+1:]
			return line, nil
		}
		if lr.eof {
			if len(lr.buf) == 0 {
				return nil, io.EOF
			}
			line := lr.buf
			lr.buf = nil
			return line, nil
		}
		chunk := make([]byte, 64<<10)
		n, err := lr.r.Read(chunk)
		lr.buf = append(lr.buf, chunk[:n]...)
		if err == io.EOF {
			lr.eof = true
		} else if err != nil {
			return nil, err
		}
	}
}
