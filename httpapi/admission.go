package httpapi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/mux"

	"github.com/mayflydb/mayfly/engine"
)

// Admission: what a request holds while it is served, taken once it is
// authenticated and routed (mux middleware), so that no caller without
// credentials ever holds anything.
//
//   - A declared body (Content-Length) over the route's limit is answered
//     413 at once, before a byte of it is read.
//   - A small body (up to preReadMax bytes) is read before the request takes
//     a slot; then it needs only a slot, like a request without a body.
//   - A larger or chunked body is read by the handler as it arrives: such a
//     request takes a receiving token as well as a slot, and there are
//     ReservedRequests fewer receiving tokens than slots, so bodies on their
//     way can never hold every slot.
//   - Every body must arrive at MinBodyRate bytes a second on average after
//     BodyGrace (and within the http.Server's ReadTimeout): a slower one is
//     cut with a 408.
//
// A request that finds no slot (or token) free is answered 503 at once.
//
// A long-lived stream (a continuous, longpoll or eventsource change feed,
// a configuration stream: see isStreamRequest) takes a stream token of its
// user (MaxStreamsPerUser each; one more is answered 429) and one of the
// server's (MaxStreams; one more is 503), held for its life, and a slot
// only until it is established (its handler calls streamEstablished once
// its answer's header is written): without that, one user opening
// MaxRequests feeds would hold every slot for as long as it liked and keep
// every other caller out.
//
// A share request (another cluster node's request for this node's rows of
// a view query, _all_docs or document listing it merges: it carries
// _share_rev) takes no slot but a share slot, of a separate pool
// (MaxRequests/4, at least 1), and waits for one, up to its asker's
// timeout, rather than be refused: the merger that asked holds a slot
// while it waits for its shares, so shares refused for want of a slot could
// leave every node's slots held by mergers waiting for shares none of them
// is let answer. A share takes no other node's slot (its read barrier, for
// stale=false or a listing, goes over Raft), so its wait always ends. At most 4×MaxRequests shares wait or run at once; one more
// is answered 503.

// Defaults of the admission options.
const (
	// DefaultMaxRequests is Options.MaxRequests's default.
	DefaultMaxRequests = 512
	// DefaultMinBodyRate is Options.MinBodyRate's default, in bytes a second.
	DefaultMinBodyRate = 4 << 10
	// DefaultBodyGrace is Options.BodyGrace's default.
	DefaultBodyGrace = 10 * time.Second
	// DefaultMaxStreamsPerUser is Options.MaxStreamsPerUser's default.
	DefaultMaxStreamsPerUser = 16
)

const (
	// preReadMax is the largest body read before a request takes a slot.
	preReadMax = 64 << 10
	// maxDeclaredBody is the largest body any route takes, but _bulk (which
	// streams) and the routes below with smaller limits.
	maxDeclaredBody = max(engine.MaxValueLen, maxDesignDocBody)
)

// admission is the server's slots and the body rules.
type admission struct {
	slots      chan struct{} // one per request served
	receiving  chan struct{} // one per request whose body is still arriving
	preReading chan struct{} // one per small body being read before its slot
	shares     chan struct{} // one per view share request served
	shareQueue chan struct{} // one per view share request served or waiting
	minRate    int64
	grace      time.Duration

	streams    chan struct{} // one per open stream
	perUser    int           // the most streams one user may have open
	streamsMu  sync.Mutex
	userStream map[string]int // open streams by user name
}

func newAdmission(o *Options) *admission {
	n := o.MaxRequests
	if n <= 0 {
		n = DefaultMaxRequests
	}
	reserve := o.ReservedRequests
	if reserve <= 0 {
		reserve = n / 4
	}
	reserve = min(max(reserve, 1), n-1)
	a := &admission{
		slots:      make(chan struct{}, n),
		receiving:  make(chan struct{}, max(n-reserve, 1)),
		preReading: make(chan struct{}, 4*n),
		shares:     make(chan struct{}, max(n/4, 1)),
		shareQueue: make(chan struct{}, 4*n),
		minRate:    int64(o.MinBodyRate),
		grace:      o.BodyGrace,
		perUser:    o.MaxStreamsPerUser,
		userStream: make(map[string]int),
	}
	streams := o.MaxStreams
	if streams <= 0 {
		streams = n
	}
	a.streams = make(chan struct{}, streams)
	if a.perUser <= 0 {
		a.perUser = DefaultMaxStreamsPerUser
	}
	if a.minRate <= 0 {
		a.minRate = DefaultMinBodyRate
	}
	if a.grace <= 0 {
		a.grace = DefaultBodyGrace
	}
	return a
}

// The path templates of a view query and of _all_docs.
const (
	viewRoute    = "/{bucket}/_design/{ddoc}/_view/{view}"
	allDocsRoute = "/{bucket}/_all_docs"
)

// routeTemplate is the path template of the route r matched, "" for none.
func routeTemplate(r *http.Request) string {
	if rl, ok := r.Context().Value(routeKey{}).(*routeLabel); ok && rl.viewRouted {
		return viewRoute
	}
	tmpl := ""
	if cr := mux.CurrentRoute(r); cr != nil {
		tmpl, _ = cr.GetPathTemplate()
	}
	return tmpl
}

// shareRoutes are the path templates of the requests a cluster node
// scatters to its coverers and merges: a view query, _all_docs and the
// console's document listing.
var shareRoutes = []string{viewRoute, allDocsRoute, "/pools/default/buckets/{bucket}/scopes/{scope}/collections/{collection}/docs"}

// isShareRequest says r asks for this node's share of a query another
// node merges.
func isShareRequest(r *http.Request) bool {
	// The raw query is looked at first: parsing it (URL.Query) for every
	// request cost a view answer a second parse of its parameters.
	return strings.Contains(r.URL.RawQuery, shareRev) && r.URL.Query().Has(shareRev) &&
		slices.Contains(shareRoutes, routeTemplate(r))
}

// bodyLimit is the largest body the route r matched takes, -1 for none;
// forms says whether the route takes form bodies (a settings endpoint).
// The limit goes by route, not by content type: a document written with
// curl -d (form-encoded) takes a document's limit.
func bodyLimit(r *http.Request, forms bool) int64 {
	switch routeTemplate(r) {
	case "/{bucket}/_bulk":
		return -1 // streamed, bounded in flight (bulkMaxBytes)
	case viewRoute, allDocsRoute:
		return maxKeysBody
	}
	if forms && formContentType(r.Header.Get("Content-Type")) && r.Header.Get("Content-Type") != "" {
		return maxSettingsBody // a settings form
	}
	return maxDeclaredBody
}

// admit is mux middleware: the body limit, the body rate, and a slot or a
// share slot (see above).
func (s *server) admit(next http.Handler) http.Handler {
	a := s.sec.adm
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now() // wall clock: the body's deadline
		if lim := bodyLimit(r, takesForms(next)); lim >= 0 && r.ContentLength > lim {
			s.refuseUnread(w, r, refusedTooLarge, &httpError{http.StatusRequestEntityTooLarge, "too_large",
				"the request body (Content-Length " + strconv.FormatInt(r.ContentLength, 10) + ") is over this endpoint's limit of " + strconv.FormatInt(lim, 10) + " bytes"})
			return
		}
		hasBody := r.ContentLength > 0 || (r.ContentLength < 0 && r.Body != nil && r.Body != http.NoBody)
		var rc *http.ResponseController // the body's deadlines: none without one
		if hasBody {
			rc = http.NewResponseController(w)
		}
		// The body deadlines never pass the server's own ReadTimeout.
		var readTimeout time.Duration
		if srv, ok := r.Context().Value(http.ServerContextKey).(*http.Server); ok {
			readTimeout = srv.ReadTimeout
		}
		switch {
		case !hasBody:
		case r.ContentLength > 0 && r.ContentLength <= preReadMax:
			select {
			case a.preReading <- struct{}{}:
			default:
				s.refuseUnread(w, r, refusedOverload, errOverload)
				return
			}
			buf := make([]byte, r.ContentLength)
			_, err := io.ReadFull(&rateReader{a: a, rc: rc, r: r.Body, start: start, readTimeout: readTimeout}, buf)
			<-a.preReading
			if err != nil {
				s.bodyFailed(w, r, err)
				return
			}
			a.restoreDeadline(rc, start, readTimeout)
			r.Body = io.NopCloser(bytes.NewReader(buf))
		default:
			select {
			case a.receiving <- struct{}{}:
			default:
				s.refuseUnread(w, r, refusedOverload, errOverload)
				return
			}
			rr := &rateReader{a: a, rc: rc, r: r.Body, start: start, readTimeout: readTimeout, release: func() { <-a.receiving }}
			defer func() {
				if !rr.ended.Load() {
					// The handler left the body unread: what net/http
					// reads of it before answering must not wait.
					_ = rc.SetReadDeadline(time.Now()) // wall clock: at once
				}
				rr.done()
			}()
			r.Body = rr
		}
		if isShareRequest(r) {
			select {
			case a.shareQueue <- struct{}{}:
				defer func() { <-a.shareQueue }()
			default:
				s.refuseUnread(w, r, refusedOverload, errOverload)
				return
			}
			select {
			case a.shares <- struct{}{}:
				defer func() { <-a.shares }()
			case <-r.Context().Done():
				// The asking node gave up (its connection_timeout).
				s.refuseUnread(w, r, refusedOverload, errOverload)
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		stream := isStreamRequest(r)
		if stream {
			user := requestUser(r)
			if herr := a.openStream(user); herr != nil {
				s.refuseUnread(w, r, refusedStreams, herr)
				return
			}
			defer a.closeStream(user)
		}
		select {
		case a.slots <- struct{}{}:
		default:
			s.refuseUnread(w, r, refusedOverload, errOverload)
			return
		}
		release := sync.OnceFunc(func() { <-a.slots })
		defer release()
		if stream {
			r = r.WithContext(context.WithValue(r.Context(), streamSlotKey{}, release))
		}
		next.ServeHTTP(w, r)
	})
}

// streamSlotKey keys, in a stream request's context, the function that
// gives its slot back.
type streamSlotKey struct{}

// streamEstablished gives back the slot of a stream request (see
// isStreamRequest) once its answer has begun: the stream goes on under its
// stream tokens only. It does nothing for other requests.
func streamEstablished(r *http.Request) {
	if release, ok := r.Context().Value(streamSlotKey{}).(func()); ok {
		release()
	}
}

// The path templates of the configuration streams and of the change feed.
const (
	terseStreamRoute  = "/pools/default/bs/{bucket}"
	configStreamRoute = "/pools/default/bucketsStreaming/{bucket}"
	changesRoute      = "/{bucket}/_changes"
)

// isStreamRequest says r asks for an answer that stays open as long as its
// client likes: a configuration stream, or a change feed other than
// feed=normal (continuous, longpoll, eventsource; the feed is named in the
// query string only).
func isStreamRequest(r *http.Request) bool {
	switch routeTemplate(r) {
	case terseStreamRoute, configStreamRoute:
		return true
	case changesRoute:
		switch r.URL.Query().Get("feed") {
		case "continuous", "longpoll", "eventsource":
			return true
		}
	}
	return false
}

// openStream takes a stream token of user's and one of the server's, or
// says why not.
func (a *admission) openStream(user string) *httpError {
	a.streamsMu.Lock()
	defer a.streamsMu.Unlock()
	if a.userStream[user] >= a.perUser {
		return &httpError{http.StatusTooManyRequests, "too_many_requests", "user " + strconvQuote(user) + " has its maximum of " +
			strconv.Itoa(a.perUser) + " streams (change feeds other than feed=normal, configuration streams) open; close one first"}
	}
	select {
	case a.streams <- struct{}{}:
	default:
		return &httpError{http.StatusServiceUnavailable, "too_many_requests", "the server has its maximum of " +
			strconv.Itoa(cap(a.streams)) + " streams (change feeds other than feed=normal, configuration streams) open; retry later"}
	}
	a.userStream[user]++
	return nil
}

// closeStream gives back what openStream took.
func (a *admission) closeStream(user string) {
	a.streamsMu.Lock()
	defer a.streamsMu.Unlock()
	<-a.streams
	if a.userStream[user]--; a.userStream[user] <= 0 {
		delete(a.userStream, user)
	}
}

// refuseUnread refuses a request whose body may be unread, closing the
// connection after the answer: net/http would otherwise read what is left
// of the body (up to 256 KiB) before answering, at the sender's pace.
func (s *server) refuseUnread(w http.ResponseWriter, r *http.Request, reason string, err *httpError) {
	w.Header().Set("Connection", "close")
	s.refuse(w, r, reason, err)
}

// errOverload answers a request that finds no slot free.
var errOverload = &httpError{http.StatusServiceUnavailable, "too_many_requests", "the server is answering its maximum of concurrent requests; retry shortly"}

// bodyFailed answers a small body that could not be read before its slot.
func (s *server) bodyFailed(w http.ResponseWriter, r *http.Request, err error) {
	w.Header().Set("Connection", "close")
	if errors.Is(err, errSlowBody) {
		s.refuseUnread(w, r, refusedSlowBody, slowBodyError(s.sec.adm))
		return
	}
	writeError(w, errBadRequest("reading the body: "+err.Error()))
}

// errSlowBody is a body cut for arriving too slowly.
var errSlowBody = errors.New("the request body arrived too slowly")

func slowBodyError(a *admission) *httpError {
	return &httpError{http.StatusRequestTimeout, "request_timeout", "the request body arrived slower than " +
		strconv.FormatInt(a.minRate, 10) + " bytes a second after the first " + a.grace.String() + " (see mayfly serve --min-body-rate)"}
}

// restoreDeadline puts back the connection's read deadline about as
// net/http set it (the start of the request plus ReadTimeout), once the body
// is read.
func (a *admission) restoreDeadline(rc *http.ResponseController, start time.Time, readTimeout time.Duration) {
	var d time.Time
	if readTimeout > 0 {
		d = start.Add(readTimeout)
	}
	_ = rc.SetReadDeadline(d)
}

// rateReader reads a body under the minimum rate: before each read the
// connection's deadline is set to when the bytes so far (and one more)
// were due, capped by ReadTimeout. It releases its token when the body ends.
type rateReader struct {
	a           *admission
	rc          *http.ResponseController
	r           io.ReadCloser
	start       time.Time
	readTimeout time.Duration // the server's, 0 for none
	n           int64
	err         error // sticky: the first error, io.EOF included
	release     func()
	ended       atomic.Bool
}

func (b *rateReader) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	due := b.start.Add(b.a.grace + time.Duration(float64(b.n+1)/float64(b.a.minRate)*float64(time.Second)))
	if b.readTimeout > 0 {
		if end := b.start.Add(b.readTimeout); end.Before(due) {
			due = end
		}
	}
	deadlineSet := b.rc.SetReadDeadline(due) == nil
	n, err := b.r.Read(p)
	b.n += int64(n)
	if err != nil {
		if isTimeout(err) && deadlineSet {
			err = errors.Join(errSlowBody, err)
		}
		if deadlineSet && !isTimeout(err) {
			b.a.restoreDeadline(b.rc, b.start, b.readTimeout)
		}
		b.err = err
		b.done()
	}
	return n, err
}

// Close closes the body and releases the token.
func (b *rateReader) Close() error {
	b.done()
	return b.r.Close()
}

// done releases the receiving token, once (the handler may call Close
// from another goroutine than the one serving).
func (b *rateReader) done() {
	if b.ended.CompareAndSwap(false, true) && b.release != nil {
		b.release()
	}
}

// isTimeout reports a network timeout.
func isTimeout(err error) bool {
	ne, ok := errors.AsType[net.Error](err)
	return ok && ne.Timeout()
}
