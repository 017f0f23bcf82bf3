package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/mayflydb/mayfly/engine"
)

// Bulk writes: POST /{bucket}/_bulk takes newline-delimited JSON, one
// operation a line, and answers newline-delimited JSON, one result a line in
// the order of the input. Operations run concurrently (up to bulkWindow at
// once, holding at most bulkMaxBytes of input) through the same engine calls
// as the single-document API, so they share group commits; results stream
// out as soon as every earlier one is known.
const (
	// bulkWindow bounds the operations in flight: read, not yet answered.
	bulkWindow = 1024
	// bulkMaxLine is the longest line: the largest value plus room for the
	// rest of the operation. A longer line is answered with an error line
	// and skipped.
	bulkMaxLine = engine.MaxValueLen + 64<<10
	// bulkMaxBytes bounds the input bytes held by operations in flight (one
	// operation is always let through, however long).
	bulkMaxBytes = 64 << 20
)

// bulkOp is one line of a bulk request.
type bulkOp struct {
	Op             string          `json:"op"`
	ID             *string         `json:"id"`
	Doc            json.RawMessage `json:"doc"`
	Expiry         *int64          `json:"expiry"`
	PreserveExpiry bool            `json:"preserve_expiry"`
	Flags          uint32          `json:"flags"`
	CAS            flexUint        `json:"cas"`
	Collection     string          `json:"collection"`
}

// flexUint is an unsigned integer given as a JSON number or a string (a CAS
// is above 2^53, where JavaScript numbers lose precision).
type flexUint uint64

func (u *flexUint) UnmarshalJSON(b []byte) error {
	s := string(bytes.Trim(b, `"`))
	if s == "null" {
		return nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return fmt.Errorf("must be an unsigned integer, got %s", b)
	}
	*u = flexUint(v)
	return nil
}

// bulkSlot is the answer to one line, filled by its goroutine.
type bulkSlot struct {
	done chan struct{}
	out  []byte
}

// byteBudget bounds the bytes held by operations in flight.
type byteBudget struct {
	mu   sync.Mutex
	cond sync.Cond
	used int
	max  int
}

func newByteBudget(max int) *byteBudget {
	b := &byteBudget{max: max}
	b.cond.L = &b.mu
	return b
}

// acquire waits until n bytes fit; with nothing held anything fits.
func (b *byteBudget) acquire(n int) {
	b.mu.Lock()
	for b.used > 0 && b.used+n > b.max {
		b.cond.Wait()
	}
	b.used += n
	b.mu.Unlock()
}

func (b *byteBudget) release(n int) {
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
	b.cond.Broadcast()
}

// bulk handles POST /{bucket}/_bulk.
func (s *server) bulk(w http.ResponseWriter, r *http.Request) {
	b, err := s.bucketOf(r)
	if err != nil {
		writeError(w, err)
		return
	}
	rc := http.NewResponseController(w)
	// Answers go out while the body is still coming in.
	_ = rc.EnableFullDuplex()
	ctx := r.Context()
	queue := make(chan *bulkSlot, bulkWindow)
	budget := newByteBudget(bulkMaxBytes)
	writerDone := make(chan struct{})
	w.Header().Set("Content-Type", "application/x-ndjson")
	go func() {
		defer close(writerDone)
		bulkAnswer(w, rc, queue)
	}()
	br := bufio.NewReaderSize(r.Body, 64<<10)
	var chainMu sync.Mutex
	chain := make(map[string]*bulkSlot) // the last operation in flight on each document
	for n := 1; ; n++ {
		line, tooLong, rerr := readBulkLine(br, bulkMaxLine)
		switch {
		case tooLong:
			queue <- doneSlot(errorLine(nil, n, &httpError{http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("line %d is over %d bytes", n, bulkMaxLine)}))
		case len(bytes.TrimSpace(line)) > 0:
			op, bad := parseBulkLine(line, n)
			if bad != nil {
				queue <- doneSlot(bad)
				break
			}
			sl := &bulkSlot{done: make(chan struct{})}
			size := len(line)
			line = nil
			budget.acquire(size)
			// Operations on one document run in the order of the lines.
			ck := op.Collection + "\x00" + *op.ID
			chainMu.Lock()
			prev := chain[ck]
			chain[ck] = sl
			chainMu.Unlock()
			queue <- sl
			go func() {
				if prev != nil {
					<-prev.done
				}
				sl.out = s.bulkApply(ctx, b, op)
				chainMu.Lock()
				if chain[ck] == sl {
					delete(chain, ck)
				}
				chainMu.Unlock()
				budget.release(size)
				close(sl.done)
			}()
		}
		if rerr != nil {
			if !errors.Is(rerr, io.EOF) {
				he := classify(rerr)
				if he.status == http.StatusInternalServerError {
					he = &httpError{http.StatusBadRequest, "bad_request", "reading the body: " + rerr.Error()}
				}
				queue <- doneSlot(errorLine(nil, 0, he))
			}
			break
		}
	}
	close(queue)
	<-writerDone
}

func doneSlot(out []byte) *bulkSlot {
	sl := &bulkSlot{done: make(chan struct{}), out: out}
	close(sl.done)
	return sl
}

// bulkAnswer writes the slots' answers in order, flushing whenever the next
// one is not ready yet. After a failed write it still drains the queue.
func bulkAnswer(w http.ResponseWriter, rc *http.ResponseController, queue <-chan *bulkSlot) {
	bw := bufio.NewWriterSize(w, 32<<10)
	failed := false
	flush := func() {
		if failed || bw.Buffered() == 0 {
			return
		}
		if bw.Flush() != nil || rc.Flush() != nil {
			failed = true
		}
	}
	for {
		var sl *bulkSlot
		var ok bool
		select {
		case sl, ok = <-queue:
		default:
			flush()
			sl, ok = <-queue
		}
		if !ok {
			break
		}
		select {
		case <-sl.done:
		default:
			flush()
			<-sl.done
		}
		if !failed {
			if _, err := bw.Write(sl.out); err != nil {
				failed = true
			}
		}
	}
	flush()
}

// readBulkLine reads the next line, without its end of line, into a slice of
// its own. A line over max bytes is read past and dropped: tooLong. err is
// io.EOF after the last line.
func readBulkLine(br *bufio.Reader, max int) (line []byte, tooLong bool, err error) {
	for {
		frag, err := br.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(frag) > max+2 { // +2: "\r\n"
				tooLong, line = true, nil
			} else {
				line = append(line, frag...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		return line, tooLong, err
	}
}

// parseBulkLine decodes line n; a bad line gives its error line instead.
func parseBulkLine(line []byte, n int) (*bulkOp, []byte) {
	op := new(bulkOp)
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(op); err != nil {
		return nil, errorLine(nil, n, classify(errBadRequest(fmt.Sprintf("line %d is not a JSON operation: %v", n, err))))
	}
	if dec.More() {
		return nil, errorLine(nil, n, classify(errBadRequest(fmt.Sprintf("line %d holds more than one JSON value", n))))
	}
	if op.ID == nil {
		return nil, errorLine(nil, n, classify(errBadRequest(fmt.Sprintf("line %d: id is required", n))))
	}
	return op, nil
}

// bulkApply runs one operation and returns its answer line.
func (s *server) bulkApply(ctx context.Context, b *engine.Bucket, op *bulkOp) []byte {
	key := *op.ID
	d, err := s.bulkDo(ctx, b, key, op)
	if err != nil {
		return errorLine(&key, 0, classify(err))
	}
	out := make([]byte, 0, 80+len(key))
	out = append(out, `{"id":`...)
	out = appendJSONString(out, key)
	out = append(out, `,"cas":`...)
	out = strconv.AppendUint(out, d.CAS, 10)
	out = append(out, `,"seq":`...)
	out = strconv.AppendUint(out, d.Seq, 10)
	out = append(out, `,"expiration":`...)
	out = strconv.AppendInt(out, d.Expiration, 10)
	return append(out, "}\n"...)
}

func (s *server) bulkDo(ctx context.Context, b *engine.Bucket, key string, op *bulkOp) (*engine.Document, error) {
	if err := engine.ValidateKey(key); err != nil {
		return nil, err
	}
	c := b.DefaultCollection()
	if op.Collection != "" {
		scope, coll, ok := strings.Cut(op.Collection, ".")
		if !ok {
			return nil, errBadRequest(fmt.Sprintf("collection must be scope.collection, got %q", op.Collection))
		}
		var err error
		if c, err = b.Collection(scope, coll); err != nil {
			return nil, err
		}
	}
	o := engine.WriteOptions{CAS: uint64(op.CAS), Flags: op.Flags, PreserveExpiry: op.PreserveExpiry}
	if op.Expiry != nil {
		o.Expiry = *op.Expiry
	}
	write := c.Upsert
	switch op.Op {
	case "upsert":
	case "insert":
		write = c.Insert
	case "replace":
		write = c.Replace
	case "delete":
		return c.Delete(ctx, key, &o)
	case "touch":
		if op.Expiry == nil {
			return nil, errBadRequest("expiry is required")
		}
		return c.Touch(ctx, key, o.Expiry)
	case "":
		return nil, errBadRequest("op is required: upsert, insert, replace, delete or touch")
	default:
		return nil, errBadRequest(fmt.Sprintf("op must be upsert, insert, replace, delete or touch, got %q", op.Op))
	}
	if op.Doc == nil {
		return nil, errBadRequest("doc is required for " + op.Op)
	}
	return write(ctx, key, op.Doc, &o)
}

// errorLine is {"id": id, "error": code, "reason": reason}, with "line": n
// instead of the id when the line has none (n 0: none either).
func errorLine(id *string, n int, he *httpError) []byte {
	out := make([]byte, 0, 64+len(he.reason))
	out = append(out, '{')
	if id != nil {
		out = append(out, `"id":`...)
		out = appendJSONString(out, *id)
		out = append(out, ',')
	} else if n > 0 {
		out = append(out, `"line":`...)
		out = strconv.AppendInt(out, int64(n), 10)
		out = append(out, ',')
	}
	out = append(out, `"error":`...)
	out = appendJSONString(out, he.code)
	out = append(out, `,"reason":`...)
	out = appendJSONString(out, he.reason)
	return append(out, "}\n"...)
}

// appendJSONString appends s as a JSON string.
func appendJSONString(out []byte, s string) []byte {
	plain := utf8.ValidString(s)
	for i := 0; plain && i < len(s); i++ {
		c := s[i]
		plain = c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' && c < 0x80
	}
	if plain {
		out = append(out, '"')
		out = append(out, s...)
		return append(out, '"')
	}
	b, _ := json.Marshal(s)
	return append(out, b...)
}
