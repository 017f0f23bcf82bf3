package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/internal/jsonstr"
)

// Bulk writes: POST /{bucket}/_bulk takes newline-delimited JSON, one
// operation a line, and answers newline-delimited JSON, one result a line in
// the order of the input. Operations run through an engine.Pipeline (up to
// its window at once, holding at most its byte budget of input) with the
// same engine calls as the single-document API, so they share group commits;
// results stream out as soon as every earlier one is known.
const (
	// bulkMaxLine is the longest line: the largest value, as a binary
	// one's "base64" carries it (4 bytes for every 3, the longest form a
	// value takes on a line), plus room for the rest of the operation. A
	// longer line is answered with an error line and skipped; a value
	// too large is refused by the engine's own limit (ErrValueTooLarge).
	bulkMaxLine = (engine.MaxValueLen+2)/3*4 + 64<<10
)

// bulkOp is one line of a bulk request, parsed.
type bulkOp struct {
	op             string
	id             string
	doc            []byte // nil when the line has none; a slice of the line, or the bytes "base64" decodes to
	binary         bool   // doc came from "base64"
	expiry         int64
	hasExpiry      bool
	preserveExpiry bool
	flags          uint32
	cas            uint64
	collection     string
	durability     engine.Durability // the line's own level, else the request's ?durability=
}

// bulkSlot is one operation in flight and its answer, filled by the task
// that runs it: an error line (out), or the written document's metadata,
// which the answer writer formats.
type bulkSlot struct {
	op   bulkOp
	eop  engine.Op // the engine's operation, filled when it runs; here so that it is no allocation of its own
	done <-chan struct{}
	out  []byte // the answer line when it is an error
	cas  uint64
	seq  uint64
	exp  int64
}

// bulk handles POST /{bucket}/_bulk.
//
// The body is read line by line; each good line becomes a slot, queued for
// the answer writer in input order and submitted to an engine.Pipeline,
// which runs operations on one document in the order of the lines.
func (s *server) bulk(w http.ResponseWriter, r *http.Request) error {
	b, err := s.bucketOf(r)
	if err != nil {
		return err
	}
	level, err := durabilityParam(r.URL.Query())
	if err != nil {
		return err
	}
	rc := http.NewResponseController(w)
	// Answers go out while the body is still coming in.
	_ = rc.EnableFullDuplex()
	ctx := r.Context()
	queue := make(chan *bulkSlot, engine.DefaultPipelineWindow)
	writerDone, drained := make(chan struct{}), make(chan struct{})
	w.Header().Set("Content-Type", "application/x-ndjson")
	// The answers go through a spool, so that a client reading them only
	// once it has sent the whole body does not stop the body's reading.
	sp := newSpool(spoolMemMax, spoolFileMax)
	go func() {
		defer close(drained)
		sp.drain(w, rc.Flush)
	}()
	go func() {
		defer close(writerDone)
		bulkAnswer(sp, queue)
		sp.Close()
	}()
	pipe := engine.NewPipeline(ctx, nil)
	var fw *bulkForwarder // forwards the lines other nodes lead (bulkforward.go), on a cluster node
	if s.route != nil {
		fw = s.newBulkForwarder(r, b)
	}
	br := bufio.NewReaderSize(r.Body, 64<<10)
	for n := 1; ; n++ {
		line, tooLong, rerr := readBulkLine(br, bulkMaxLine)
		// A read that failed (the client hung up, the body was cut) ends
		// an unterminated line: it may be a prefix of what the client
		// meant (a valid JSON value too, `{"v":1}` of `{"v":12}`), so it is
		// not applied. Only a body that ends (EOF) ends its last line.
		cut := rerr != nil && !errors.Is(rerr, io.EOF)
		switch {
		case cut && len(bytes.TrimSpace(line)) > 0:
			queue <- doneSlot(errorLine(nil, n, &httpError{http.StatusBadRequest, "bad_request", fmt.Sprintf("line %d was cut off by the end of the request's body: not applied", n)}))
		case tooLong:
			queue <- doneSlot(errorLine(nil, n, &httpError{http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("line %d is over %d bytes", n, bulkMaxLine)}))
		case len(bytes.TrimSpace(line)) > 0:
			sl := &bulkSlot{}
			if bad := parseBulkLine(line, n, &sl.op); bad != nil {
				queue <- doneSlot(bad)
				break
			}
			if sl.op.durability == engine.DurabilityUnset {
				sl.op.durability = level
			}
			// Operations on one document run in the order of the lines.
			// They are chained by id alone: a line may name the default
			// collection ("_default._default") or leave it out, and both
			// are the same document; the same id in two collections is
			// two documents, which the chain only keeps in order too.
			ck := sl.op.id
			var raw []byte // kept for forwarding, on a cluster node
			if fw != nil {
				raw = line
			}
			sl.done = pipe.Go(ck, len(line), func(ctx context.Context) {
				if raw == nil {
					s.bulkApply(ctx, b, sl)
				} else {
					fw.line(ctx, sl, raw)
				}
				sl.op.doc = nil
			}).Done()
			line = nil
			queue <- sl
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
	pipe.Wait()
	if fw != nil {
		fw.wait()
	}
	close(queue)
	<-writerDone
	<-drained
	return nil
}

// doneSlot returns the slot of a line answered without running (an error).
func doneSlot(out []byte) *bulkSlot {
	done := make(chan struct{})
	close(done)
	return &bulkSlot{done: done, out: out}
}

// bulkAnswer writes the slots' answers in order to out (the answer's
// spool), flushing whenever the next one is not ready yet. After a failed
// write it still drains the queue.
func bulkAnswer(out io.Writer, queue <-chan *bulkSlot) {
	bw := bufio.NewWriterSize(out, 32<<10)
	var scratch []byte
	failed := false
	flush := func() {
		if failed || bw.Buffered() == 0 {
			return
		}
		if bw.Flush() != nil {
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
			line := sl.out
			if line == nil {
				scratch = appendBulkResult(scratch[:0], sl)
				line = scratch
			}
			if _, err := bw.Write(line); err != nil {
				failed = true
			}
		}
		sl.out = nil
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
			} else if line == nil {
				line = bytes.Clone(frag)
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

// parseBulkLine decodes line n into op; a bad line gives its error line
// instead. The line is checked as JSON first (gjson's validator, which
// allocates nothing); its fields are then read in place, so that the
// document is a slice of the line, not a copy.
func parseBulkLine(line []byte, n int, op *bulkOp) []byte {
	bad := func(format string, args ...any) []byte {
		return errorLine(nil, n, classify(errBadRequest(fmt.Sprintf("line %d: ", n)+fmt.Sprintf(format, args...))))
	}
	// The line's object holds a document at most jsonstr.MaxDepth deep;
	// deeper, it is refused unchecked (the check does not recurse, and a
	// line that deep is no document this server could give back).
	if len(line) > 2*(jsonstr.MaxDepth+1) { // a shorter line cannot nest that deep
		if at := jsonstr.DepthOver(line, jsonstr.MaxDepth+1); at >= 0 {
			return bad("nested deeper than %d levels (exceeded max depth at byte %d): a doc is at most %d deep", jsonstr.MaxDepth+1, at, jsonstr.MaxDepth)
		}
	}
	if !jsonstr.ValidDepth(line, jsonstr.MaxDepth+1) {
		return errorLine(nil, n, classify(errBadRequest(fmt.Sprintf("line %d is not valid JSON", n))))
	}
	if !utf8.Valid(line) {
		// gjson takes invalid UTF-8 inside a string; JSON is UTF-8, and a
		// single-document PUT declared application/json refuses it too.
		return errorLine(nil, n, classify(errBadRequest(fmt.Sprintf("line %d is not valid UTF-8 (at byte %d)", n, invalidUTF8At(line)))))
	}
	i := skipJSONSpace(line, 0)
	if line[i] != '{' {
		return errorLine(nil, n, classify(errBadRequest(fmt.Sprintf("line %d is not a JSON object", n))))
	}
	hasID := false
	for i = skipJSONSpace(line, i+1); line[i] != '}'; {
		kEnd := jsonStringEnd(line, i)
		key, ok := jsonString(line[i:kEnd])
		if !ok {
			return bad("a field name does not decode")
		}
		i = skipJSONSpace(line, kEnd) + 1 // past ':'
		i = skipJSONSpace(line, i)
		vEnd := jsonValueEnd(line, i)
		v := line[i:vEnd]
		null := string(v) == "null"
		switch key {
		case "op":
			if op.op, ok = jsonString(v); !ok && !null {
				return bad("op must be a string, got %s", v)
			}
		case "id":
			if null {
				hasID = false
				break
			}
			if op.id, ok = jsonString(v); !ok {
				return bad("id must be a string, got %s", v)
			}
			hasID = true
		case "doc":
			if op.binary {
				return bad("doc and base64 cannot both be given")
			}
			op.doc = v
		case "base64":
			// A binary value (the listings' "base64"), stored as the bytes
			// it decodes to, flags and all: how a value that is not JSON
			// goes through a line of JSON.
			if op.doc != nil {
				return bad("doc and base64 cannot both be given")
			}
			str, ok := jsonString(v)
			if !ok {
				return bad("base64 must be a string, got %s", v)
			}
			raw, err := base64.StdEncoding.DecodeString(str)
			if err != nil {
				return bad("base64 is not standard base64 (RFC 4648, with padding): %s", strings.TrimPrefix(err.Error(), "illegal base64 data "))
			}
			if raw == nil {
				raw = []byte{} // an empty value is a value, not a missing doc
			}
			op.doc, op.binary = raw, true
		case "expiry":
			if null {
				op.hasExpiry = false
				break
			}
			e, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil {
				return bad("expiry must be an integer, got %s", v)
			}
			if e > maxExpiry {
				return bad("%s", expiryRangeReason("expiry", e))
			}
			op.expiry, op.hasExpiry = e, true
		case "preserve_expiry":
			switch string(v) {
			case "true":
				op.preserveExpiry = true
			case "false", "null":
				op.preserveExpiry = false
			default:
				return bad("preserve_expiry must be true or false, got %s", v)
			}
		case "flags":
			if null {
				op.flags = 0
				break
			}
			f, err := strconv.ParseUint(string(v), 10, 32)
			if err != nil {
				return bad("flags must be an unsigned 32-bit integer, got %s", v)
			}
			op.flags = uint32(f)
		case "cas":
			// A number or a string: a CAS is above 2^53, where JavaScript
			// numbers lose precision.
			if null {
				op.cas = 0
				break
			}
			digits := v
			if v[0] == '"' {
				str, _ := jsonString(v)
				digits = []byte(str)
			}
			c, err := strconv.ParseUint(string(digits), 10, 64)
			if err != nil {
				return bad("cas must be an unsigned integer, got %s", v)
			}
			op.cas = c
		case "collection":
			if op.collection, ok = jsonString(v); !ok && !null {
				return bad("collection must be a string, got %s", v)
			}
		case "durability":
			str, ok := jsonString(v)
			if !ok && !null {
				return bad("durability must be a string, got %s", v)
			}
			d, err := engine.ParseDurability(str)
			if err != nil {
				return bad("durability must be none, majority, majorityAndPersistActive or persistToMajority, got %s", v)
			}
			op.durability = d
		default:
			return bad("unknown field %q", key)
		}
		i = skipJSONSpace(line, vEnd)
		if line[i] == ',' {
			i = skipJSONSpace(line, i+1)
		}
	}
	if !hasID {
		return bad("id is required")
	}
	return nil
}

// The helpers below walk JSON already checked as valid.

// skipJSONSpace returns the index of the first non-space byte from i.
func skipJSONSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// jsonStringEnd returns the index just past the string starting at b[i].
func jsonStringEnd(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

// jsonValueEnd returns the index just past the value starting at b[i].
func jsonValueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return jsonStringEnd(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = jsonStringEnd(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return i
	default: // a number, true, false or null
		for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && b[i] != ' ' && b[i] != '\t' && b[i] != '\n' && b[i] != '\r' {
			i++
		}
		return i
	}
}

// jsonString decodes v if it is a JSON string.
func jsonString(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	if bytes.IndexByte(v, '\\') < 0 {
		return string(v[1 : len(v)-1]), true
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", false
	}
	return s, true
}

// bulkApply runs the operation of sl here, records its answer in sl and
// returns its error.
func (s *server) bulkApply(ctx context.Context, b *engine.Bucket, sl *bulkSlot) error {
	d, err := s.bulkDo(ctx, b, sl)
	if err != nil {
		sl.out = errorLine(&sl.op.id, 0, classify(err))
		return err
	}
	sl.cas, sl.seq, sl.exp = d.CAS, d.Seq, d.Expiration
	return nil
}

// appendBulkResult appends the answer line of sl's successful operation:
// {"id","cas","seq","expiration"}.
func appendBulkResult(out []byte, sl *bulkSlot) []byte {
	out = append(out, `{"id":`...)
	out = jsonstr.Append(out, sl.op.id)
	out = append(out, `,"cas":`...)
	out = strconv.AppendUint(out, sl.cas, 10)
	out = append(out, `,"seq":`...)
	out = strconv.AppendUint(out, sl.seq, 10)
	out = append(out, `,"expiration":`...)
	out = strconv.AppendInt(out, sl.exp, 10)
	return append(out, "}\n"...)
}

func (s *server) bulkDo(ctx context.Context, b *engine.Bucket, sl *bulkSlot) (*engine.Document, error) {
	op := &sl.op
	if err := engine.ValidateKey(op.id); err != nil {
		return nil, err
	}
	c := b.DefaultCollection()
	if op.collection != "" {
		scope, coll, ok := strings.Cut(op.collection, ".")
		if !ok {
			return nil, errBadRequest(fmt.Sprintf("collection must be scope.collection, got %q", op.collection))
		}
		var err error
		if c, err = b.Collection(scope, coll); err != nil {
			return nil, err
		}
	}
	switch op.op {
	case "upsert", "insert", "replace":
		if op.doc == nil {
			return nil, errBadRequest("doc (or base64) is required for " + op.op)
		}
		// Decoded base64 that happens to be JSON is stored as JSON
		// (engine.DetectType), so it meets the same limit.
		if err := checkJSONDepth(op.doc, "doc"); err != nil {
			return nil, err
		}
	case "delete":
	case "touch":
		if !op.hasExpiry {
			return nil, errBadRequest("expiry is required")
		}
	case "":
		return nil, errBadRequest("op is required: upsert, insert, replace, delete or touch")
	default:
		return nil, errBadRequest(fmt.Sprintf("op must be upsert, insert, replace, delete or touch, got %q", op.op))
	}
	sl.eop = engine.Op{Kind: engine.OpKind(op.op), Key: op.id, Value: op.doc,
		Opts: engine.WriteOptions{CAS: op.cas, Flags: op.flags, PreserveExpiry: op.preserveExpiry, Expiry: op.expiry, Durability: op.durability}}
	return c.Apply(ctx, &sl.eop)
}

// maxEchoedID is the most of an id an error line echoes: an id longer than
// any valid key is cut (ending in "…"), so a huge invalid id costs no huge
// answer.
const maxEchoedID = 256

// errorLine is {"id": id, "error": code, "reason": reason}, with "line": n
// instead of the id when the line has none (n 0: none either).
func errorLine(id *string, n int, he *httpError) []byte {
	out := make([]byte, 0, 64+len(he.reason))
	out = append(out, '{')
	if id != nil {
		out = append(out, `"id":`...)
		echo := *id
		if len(echo) > maxEchoedID {
			echo = capString(echo, maxEchoedID)
		}
		out = jsonstr.Append(out, echo)
		out = append(out, ',')
	} else if n > 0 {
		out = append(out, `"line":`...)
		out = strconv.AppendInt(out, int64(n), 10)
		out = append(out, ',')
	}
	out = append(out, `"error":`...)
	out = jsonstr.Append(out, he.code)
	out = append(out, `,"reason":`...)
	out = jsonstr.Append(out, he.reason)
	return append(out, "}\n"...)
}
