package changes

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"
)

var (
	// ErrBadRequest reports a parameter the feed cannot take; the wrapping
	// error names it.
	ErrBadRequest = errors.New("changes: bad request")
	// ErrRollback reports a since the bucket can no longer serve without
	// losing changes: a position from a history the bucket no longer holds
	// (recreated, restored, writes lost in a crash), or older than deletions
	// the metadata purge has removed. The consumer must start again from
	// since=0. It wraps engine.ErrRollback when the history is the cause.
	ErrRollback = errors.New("changes: cannot resume from since")
)

// Mode is the feed parameter: how the answer is delivered.
type Mode string

// The feed modes, as CouchDB names them.
const (
	// Normal answers what has changed, up to the moment of the request,
	// as one JSON object.
	Normal Mode = "normal"
	// Longpoll is Normal, but waits for a change when there is none yet.
	Longpoll Mode = "longpoll"
	// Continuous sends one JSON object per line as changes come, until the
	// timeout or the limit, then a last_seq line.
	Continuous Mode = "continuous"
	// EventSource sends changes as server-sent events (data: and id: lines).
	EventSource Mode = "eventsource"
)

// Defaults and bounds of the time parameters, in CouchDB's units
// (milliseconds on the wire).
const (
	// DefaultTimeout ends a longpoll or continuous feed that has seen no
	// change for this long, as CouchDB's changes_timeout does.
	DefaultTimeout = 60 * time.Second
	// DefaultHeartbeat is what heartbeat=true means.
	DefaultHeartbeat = 60 * time.Second
	// minHeartbeat keeps a client from asking for a flood of newlines.
	minHeartbeat = 10 * time.Millisecond
	// maxWaitMS caps timeout and heartbeat, in milliseconds (about 146
	// years: a longer one waits as long). In nanoseconds it and the
	// server's own margins added to it fit a time.Duration, which a larger
	// value would overflow (wrapping round to a short or negative wait).
	maxWaitMS = int64(math.MaxInt64 / 2 / int64(time.Millisecond))
)

// Request is a parsed _changes request.
type Request struct {
	// Feed is the delivery mode (Normal when absent).
	Feed Mode
	// Since is where to start: "" or "0" from the beginning, "now" from the
	// present, else a seq the feed gave. The last-event-id parameter, when
	// given, replaces since (it is the alias of EventSource's Last-Event-ID
	// header, which ResumeFrom applies).
	Since string
	// Limit caps the rows sent; negative means no limit.
	Limit int
	// IncludeDocs adds each row's document body ("doc"): for a deletion
	// the tombstone {"_id","_rev","_deleted":true}, null for a document
	// expired but not yet deleted.
	IncludeDocs bool
	// Heartbeat, when non-zero, sends a newline (an event in eventsource)
	// whenever nothing has been sent for this long, while the feed reads
	// the bucket or waits for a change, in every mode (in a normal or
	// longpoll answer the newline is whitespace between rows), keeping the
	// connection alive; other documents' changes do not delay it. A
	// longpoll, continuous or eventsource feed then runs until its limit
	// (longpoll: a change) or until the client goes, whatever
	// the timeout parameter says (ParseRequest sets Timeout to -1), as
	// CouchDB's does.
	Heartbeat time.Duration
	// Timeout ends a longpoll, continuous or eventsource feed after this
	// long without a change (0: as soon as it has caught up); negative
	// means never (as with a heartbeat).
	Timeout time.Duration
	// Collection narrows the feed to one collection, "scope.collection";
	// "" is _default._default, as for every document endpoint.
	Collection string
	// Descending (descending=true) sends the feed newest first, as
	// CouchDB's does: the rows a forward read from 0 would send now, in
	// the opposite order, each with the seq the forward read gives it.
	// Since (and Last-Event-ID) is ignored; the answer's last_seq is where
	// the walk stopped: the seq of the last row sent, or, with no row, the
	// position of the moment of the request (a forward feed from it sends
	// every later change), so descending=true&limit=1 answers the newest
	// row and a since for what comes after it. pending counts the rows
	// the walk did not reach. Every mode answers the same walk, framed its
	// way, and ends without waiting for a change (CouchDB ends a
	// descending longpoll, continuous or eventsource feed once it has
	// walked back).
	Descending bool
	// DocIDs, when non-nil (filter=_doc_ids), narrows the feed to these
	// document IDs.
	DocIDs []string
}

// ParseRequest reads a _changes request's query parameters and, for a POST,
// its JSON body (which may carry doc_ids). Unknown parameters are ignored,
// as CouchDB does; style=all_docs and main_only are the same here (a document
// has one revision).
func ParseRequest(q url.Values, body []byte) (*Request, error) {
	r := &Request{Feed: Normal, Since: q.Get("since"), Limit: -1, Timeout: DefaultTimeout, Collection: q.Get("collection")}
	if q.Has("last-event-id") {
		r.Since = q.Get("last-event-id")
	}
	bad := func(format string, args ...any) (*Request, error) {
		return nil, fmt.Errorf("%w: %s", ErrBadRequest, fmt.Sprintf(format, args...))
	}
	switch f := Mode(q.Get("feed")); f {
	case "":
	case Normal, Longpoll, Continuous, EventSource:
		r.Feed = f
	default:
		return bad("feed must be normal, longpoll, continuous or eventsource, got %q", f)
	}
	switch s := q.Get("style"); s {
	case "", "main_only", "all_docs":
	default:
		return bad("style must be main_only or all_docs, got %q", s)
	}
	if q.Has("limit") {
		n, err := strconv.Atoi(q.Get("limit"))
		if err != nil || n < 0 {
			return bad("limit must be a non-negative integer, got %q", q.Get("limit"))
		}
		r.Limit = n
	}
	var err error
	if r.IncludeDocs, err = boolParam(q, "include_docs"); err != nil {
		return nil, err
	}
	if r.Descending, err = boolParam(q, "descending"); err != nil {
		return nil, err
	}
	if q.Has("timeout") {
		ms, err := strconv.ParseInt(q.Get("timeout"), 10, 64)
		if err != nil || ms < 0 {
			return bad("timeout must be milliseconds, a non-negative integer, got %q", q.Get("timeout"))
		}
		r.Timeout = time.Duration(min(ms, maxWaitMS)) * time.Millisecond
	}
	if q.Has("heartbeat") {
		switch hb := q.Get("heartbeat"); hb {
		case "true":
			r.Heartbeat = DefaultHeartbeat
		case "false":
		default:
			ms, err := strconv.ParseInt(hb, 10, 64)
			if err != nil || ms < 0 {
				return bad("heartbeat must be milliseconds, a non-negative integer, or true, got %q", hb)
			}
			r.Heartbeat = max(time.Duration(min(ms, maxWaitMS))*time.Millisecond, minHeartbeat)
		}
		if r.Heartbeat > 0 {
			// As CouchDB (get_changes_timeout): the heartbeat keeps the
			// feed alive, and an explicit timeout is ignored.
			r.Timeout = -1
		}
	}
	switch f := q.Get("filter"); f {
	case "":
	case "_doc_ids":
		ids, err := docIDs(q, body)
		if err != nil {
			return nil, err
		}
		r.DocIDs = ids
	default:
		return bad("filter %q is not supported: only _doc_ids is", f)
	}
	return r, nil
}

// ResumeFrom applies an EventSource's Last-Event-ID header: a browser that
// reconnects sends the id (the seq) of the last event it had with the URL it
// first opened, and the feed goes on after that event, as CouchDB's does
// (the header overrides since). Other modes, and an empty id, keep since.
func (r *Request) ResumeFrom(lastEventID string) {
	if r.Feed == EventSource && lastEventID != "" {
		r.Since = lastEventID
	}
}

// docIDs reads filter=_doc_ids's list: doc_ids in the POST body, or a JSON
// array in the doc_ids parameter.
func docIDs(q url.Values, body []byte) ([]string, error) {
	var ids []string
	switch {
	case len(strings.TrimSpace(string(body))) > 0:
		var b struct {
			DocIDs *[]string `json:"doc_ids"`
		}
		if err := json.Unmarshal(body, &b); err != nil {
			return nil, fmt.Errorf("%w: the body must be a JSON object with doc_ids, a list of strings: %v", ErrBadRequest, err)
		}
		if b.DocIDs == nil {
			return nil, fmt.Errorf("%w: filter=_doc_ids needs doc_ids in the body", ErrBadRequest)
		}
		ids = *b.DocIDs
	case q.Has("doc_ids"):
		if err := json.Unmarshal([]byte(q.Get("doc_ids")), &ids); err != nil {
			return nil, fmt.Errorf("%w: doc_ids must be a JSON list of strings: %v", ErrBadRequest, err)
		}
	default:
		return nil, fmt.Errorf("%w: filter=_doc_ids needs doc_ids (in a POST body, or as a JSON list parameter)", ErrBadRequest)
	}
	if ids == nil {
		ids = []string{}
	}
	return ids, nil
}

func boolParam(q url.Values, name string) (bool, error) {
	switch v := q.Get(name); v {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	default:
		return false, fmt.Errorf("%w: %s must be true or false, got %q", ErrBadRequest, name, v)
	}
}
