package httpapi

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/mayflydb/mayfly/changes"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/internal/jsonstr"
	"github.com/mayflydb/mayfly/views"
)

// allDocsKeyParams are the parameters that name a key of an _all_docs
// query: a JSON string (`"a"`, as CouchDB takes it) or, when it does not
// start with a quote, the key as it is.
var allDocsKeyParams = []string{"key", "startkey", "start_key", "endkey", "end_key"}

// allDocsQuery returns q with every bare key of allDocsKeyParams quoted,
// so that views.ParseParams, which takes JSON, reads it (q is left alone).
func allDocsQuery(q url.Values) url.Values {
	out, cloned := q, false
	for _, name := range allDocsKeyParams {
		if v := q.Get(name); q.Has(name) && !strings.HasPrefix(strings.TrimSpace(v), `"`) {
			if !cloned {
				out, cloned = maps.Clone(q), true // shallow: values are replaced, not changed
			}
			out[name] = []string{string(jsonstr.Append(nil, v))} // JSON's escapes: strconv.Quote's \x7f is no JSON
		}
	}
	return out
}

// docID decodes a key parameter, JSON already checked, as a document ID.
func docID(param string, raw []byte) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", &views.QueryError{Param: param, Code: "query_parse_error", Reason: "Query parameter `" + param + "` must be a document ID (a JSON string), got " + string(raw)}
	}
	return s, nil
}

// allDocs handles GET and POST /{bucket}/_all_docs, CouchDB's listing of
// the live documents of a collection (?collection=scope.collection, the
// default collection by default) in byte order of key:
//
//	{"total_rows":N,"offset":O,"update_seq"?:S,"rows":[{"id","key","value":{"rev"},"doc"?}]}
//
// Query (CouchDB's, parsed and refused with the reasons of a view query):
// startkey/start_key, endkey/end_key (both included unless
// inclusive_end=false), key, keys (a JSON array, in the query or as
// {"keys": [...]} in a POST body), descending (startkey is then the high
// end), skip, limit, include_docs and update_seq. A key is a JSON string or,
// when it does not start with a quote, the key as it is. A POST body's
// members give parameters too, overriding the query string's (bodyParams
// merged them before the permission check).
//
// The listing follows the store's key order (engine.Collection.List): a
// page costs what it returns and what it skips, not the collection's size.
// So do the counts: total_rows is the collection's count of live documents
// (engine.Collection.Count), which, like curr_items and a view's
// total_rows, holds expired documents until the pager purges them
// (rows never show them); offset, the rows before the first one, is given
// when it is known without counting — a range with no start bound, where
// it is the rows skipped — and left out when the range starts at a key,
// where it would cost a count of every key before it (as CouchDB leaves it
// out of a keys query, and Couchbase's views always do). update_seq=true
// adds the _changes position the listing started from: a since that
// follows the listing with every later change.
//
// Asked while the bucket warms up, a listing (keys too) waits for the
// warm-up's end, so that total_rows counts every document.
//
// keys answers a row for each key, in the order given: a live document's
// row, {"id","key","value":{"rev","deleted":true},"doc":null} for a deleted
// one and {"key","error":"not_found"} for one missing or expired; skip,
// limit and descending apply to those rows.
//
// A document's doc is its JSON object with _id and _rev set; a value that
// is not an object comes as {"_id","_rev","json"} and a binary one as
// {"_id","_rev","base64"}.
func (s *server) allDocs(w http.ResponseWriter, r *http.Request) error {
	b, err := s.bucketOf(r)
	if err != nil {
		return err
	}
	var body []byte
	if r.Method == http.MethodPost {
		if body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, maxKeysBody)); err != nil {
			return err
		}
	}
	q := r.URL.Query()
	c, err := collectionOf(b, q)
	if err != nil {
		return err
	}
	p, err := views.ParseParams(allDocsQuery(q), body)
	if err != nil {
		return err
	}
	updateSeq := false
	if q.Has("update_seq") {
		switch strings.ToLower(q.Get("update_seq")) {
		case "true":
			updateSeq = true
		case "false":
		default:
			return &views.QueryError{Param: "update_seq", Code: "query_parse_error", Reason: "Invalid boolean parameter: " + strconv.Quote(q.Get("update_seq"))}
		}
	}
	if updateSeq && b.Replicated() {
		return errFeedOnCluster()
	}
	o := engine.ListOptions{ExclusiveEnd: !p.InclusiveEnd, Descending: p.Descending}
	for _, k := range []struct {
		param string
		raw   []byte
		dst   **string
	}{{p.StartKeyParam(), p.StartKey, &o.Start}, {p.EndKeyParam(), p.EndKey, &o.End}, {"key", p.Key, &o.Start}, {"key", p.Key, &o.End}} {
		if k.raw == nil {
			continue
		}
		id, err := docID(k.param, k.raw)
		if err != nil {
			return err
		}
		*k.dst = &id
	}
	if o.Start != nil && o.End != nil && p.Key == nil {
		if !o.Descending && *o.Start > *o.End {
			return &views.QueryError{Param: p.StartKeyParam(), Code: "query_parse_error", Reason: "No rows can match your key range, reverse your start_key and end_key or set descending=true"}
		}
		if o.Descending && *o.Start < *o.End {
			return &views.QueryError{Param: p.StartKeyParam(), Code: "query_parse_error", Reason: "No rows can match your key range, reverse your start_key and end_key or set descending=false"}
		}
	}
	// total_rows counts every document, so it waits for the warm-up, as
	// the listing does (engine.Collection.List): read before the wait, it
	// is the count loaded so far.
	if err := b.WaitWarm(r.Context()); err != nil {
		return s.closedUnder(b, err)
	}
	if s.coverage != nil {
		if q.Has(shareRev) {
			return s.answerAllDocsShare(w, r, b, c, p, o)
		}
		if done, err := s.allDocsCluster(w, r, b, c, p, o, body, updateSeq); done || err != nil {
			return err
		}
	}
	seq := ""
	if updateSeq {
		seq = changes.CurrentSeq(b)
	}
	total := c.Count()
	skip, limit := p.Skip, p.Limit // limit -1: none

	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "must-revalidate")
	bw := bufio.NewWriter(w)
	started := false
	// start writes the answer's head; offset < 0 leaves offset out.
	start := func(offset int) {
		started = true
		w.WriteHeader(http.StatusOK)
		writeAllDocsHead(bw, total, offset, updateSeq, seq)
	}
	rows := 0
	var line []byte
	// row writes one row (or, when skip is left, passes over it) and says
	// whether more are wanted.
	row := func(d *engine.Document, key []byte) bool {
		if skip > 0 {
			skip--
			return true
		}
		if limit >= 0 && rows >= limit {
			return false
		}
		sep := ",\r\n"
		if rows == 0 {
			sep = "\r\n"
		}
		line = appendAllDocsRow(append(line[:0], sep...), d, key, p.IncludeDocs)
		rows++
		if _, err := bw.Write(line); err != nil {
			return false // the client went away
		}
		return limit < 0 || rows < limit
	}

	if p.Keys != nil {
		start(-1)
		keys := p.Keys
		for i := range keys {
			k := keys[i]
			if p.Descending {
				k = keys[len(keys)-1-i]
			}
			if !row(lookupRow(c, k), k) {
				break
			}
		}
	} else if limit != 0 || skip > 0 {
		if limit >= 0 {
			o.Limit = skip + limit // the most this answer reads (it skips itself, to count offset)
		}
		skipped := 0
		offsetKnown := o.Start == nil
		for d, err := range c.List(r.Context(), o) {
			if err != nil {
				err = s.closedUnder(b, err)
				if !started {
					return err // nothing was sent: a proper error status
				}
				// The answer has begun: it ends without its closing
				// bracket, so that no client takes it for a whole one.
				if r.Context().Err() == nil {
					s.log.Warn("_all_docs cut short", "bucket", b.Name(), "err", err)
				}
				bw.Flush()
				return nil
			}
			if skip > 0 {
				skip--
				skipped++
				continue
			}
			if !started {
				start(offsetIf(offsetKnown, skipped))
			}
			if !row(d, nil) {
				break
			}
		}
		if !started {
			start(offsetIf(offsetKnown, skipped))
		}
	}
	if !started {
		start(offsetIf(o.Start == nil, 0))
	}
	bw.WriteString("\r\n]}\n")
	bw.Flush()
	return nil
}

// offsetIf returns offset when known, else -1 (left out).
func offsetIf(known bool, offset int) int {
	if known {
		return offset
	}
	return -1
}

// lookupRow returns the version of the document a keys entry names (raw
// JSON) as reads see it: live, a deletion's tombstone, or nil for one
// missing, expired (purged or not) or named by a key that is not a
// string.
func lookupRow(c *engine.Collection, raw []byte) *engine.Document {
	var id string
	if json.Unmarshal(raw, &id) != nil {
		return nil
	}
	d, err := c.Peek(id)
	if err == nil {
		return d
	}
	if errors.Is(err, engine.ErrNotFound) {
		// An expiration's tombstone answers as the expired document did
		// before the pager purged it: not_found, whenever the pager ran.
		if t, err := c.Tombstone(id); err == nil && !t.Expired {
			return t
		}
	}
	return nil
}

// appendAllDocsRow appends the row of d, or the not_found row of key (raw
// JSON) when d is nil.
func appendAllDocsRow(out []byte, d *engine.Document, key []byte, withDoc bool) []byte {
	if d == nil {
		out = append(out, `{"key":`...)
		out = append(out, key...)
		return append(out, `,"error":"not_found"}`...)
	}
	out = append(out, `{"id":`...)
	out = jsonstr.Append(out, d.Key)
	out = append(out, `,"key":`...)
	out = jsonstr.Append(out, d.Key)
	out = append(out, `,"value":{"rev":`...)
	out = jsonstr.Append(out, d.Rev())
	if d.Deleted {
		out = append(out, `,"deleted":true}`...)
		if withDoc {
			out = append(out, `,"doc":null`...)
		}
		return append(out, '}')
	}
	out = append(out, '}')
	if withDoc {
		out = append(out, `,"doc":`...)
		out = changes.AppendCouchDoc(out, d)
	}
	return append(out, '}')
}
