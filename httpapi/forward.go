package httpapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mayflydb/mayfly/engine"
)

// Forwarding (issue 22 step 3). On a cluster node a request for one
// document (read, write, delete, touch) is answered by the leader of its
// partition: a node that does not lead it forwards the request there, once,
// as a reverse proxy, and returns the leader's answer unchanged (status,
// headers, body). The forwarded request carries the client's own
// credentials (its Authorization header), so the leader authenticates and
// authorizes it as it would the client; it is marked with ForwardedHeader,
// and a node that receives a marked request for a partition it does not
// lead (leadership moved while it travelled) answers 503 naming the leader
// instead of forwarding it again, with LeaderHeader naming it. A Route
// may say where else to go (Route.Reroute): when its node cannot be
// reached (the request was not sent) the request goes to the node Reroute
// names instead, once; when its node refuses it naming the leader
// (LeaderHeader), the request goes there, once. The same holds when the
// node the client reached answers the request itself, its route saying it
// leads the key's partition, and its replication refuses it naming another
// leader (engine.NotMyVBucketError, given before anything of it was
// proposed): the request goes to that leader, once, as if the route had
// said so; a forwarded request so refused is answered with LeaderHeader
// naming it. Every hop is made by the node the client reached: a request
// is never forwarded twice.

// ForwardedHeader marks a request another node forwarded (a document's
// request to its partition's leader; a view query that a node whose view
// indexes are still opening relayed to another to merge, viewrelay.go);
// its value is the forwarding node's name. A client may send it too: its
// request is then answered where it lands, never forwarded.
const ForwardedHeader = "X-Mayfly-Forwarded"

// RoutedToHeader, on the answer to a forwarded request, names the node
// that answered it (the partition's leader); the rest of the answer is
// that node's, unchanged.
const RoutedToHeader = "X-Mayfly-Routed-To"

// LeaderHeader, on a 503 refusal of a forwarded request by a node that
// does not lead the key's partition (its route said so, or its
// replication refused the request before proposing anything), names the
// node that does, as the refusing node knows it (its Raft group's
// leader): the forwarding node may send the request there
// (Route.Reroute).
const LeaderHeader = "X-Mayfly-Leader"

// UsersVersionHeader, on a request a cluster node sends another with its
// client's credentials (forwarded to a partition's leader, or asking for a
// share of a query), is how far the sending node's users have come
// (UserStore.Version). The receiving node waits, up to usersWait, for its
// own users to come as far before it authenticates the request: a user
// created or changed through the sending node is known to the receiving
// one, rather than refused for being new to it (and its source throttled,
// the sending node's address). The wait is skipped (the request
// authenticated at once, as the node's users stand) when the request is
// not marked as another node's (ForwardedHeader, or a share's
// parameter), when maxUsersWaits requests wait already, and while this
// node's users have not moved since a wait last ran out: any client can
// send the header, and a node whose users lag (cut off from etcd) would
// otherwise make every forwarded request pay the whole wait.
const UsersVersionHeader = "X-Mayfly-Users-Version"

// usersWait bounds how long a request carrying UsersVersionHeader waits
// for this node's users to come as far.
const usersWait = 5 * time.Second

// maxUsersWaits bounds the requests waiting for this node's users at once.
const maxUsersWaits = 128

// usersWaits is what awaitUsers keeps: the waits running, and the node's
// users version when a wait last ran out.
type usersWaits struct {
	slots chan struct{}
	stuck atomic.Int64 // 1 + UserStore.Version when a wait ran out; 0: none
}

// setUsersVersion sets UsersVersionHeader on h, a request sent to another
// node with a client's credentials (removed when this node has none).
func (s *server) setUsersVersion(h http.Header) {
	if s.users == nil || s.users.Version() <= 0 {
		h.Del(UsersVersionHeader)
		return
	}
	h.Set(UsersVersionHeader, strconv.FormatInt(s.users.Version(), 10))
}

// awaitUsers waits, up to usersWait, for this node's users to have come
// as far as r's UsersVersionHeader says the node that sent it had (see
// UsersVersionHeader for when it does not).
func (s *server) awaitUsers(r *http.Request) {
	h := r.Header.Get(UsersVersionHeader)
	if h == "" || s.users == nil {
		return
	}
	v, err := strconv.ParseInt(h, 10, 64)
	if err != nil || v <= 0 {
		return
	}
	have := s.users.Version()
	if have >= v || have+1 == s.usersWaits.stuck.Load() || !fromNode(r) {
		return
	}
	select {
	case s.usersWaits.slots <- struct{}{}:
		defer func() { <-s.usersWaits.slots }()
	default:
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), usersWait)
	defer cancel()
	// Its error is no answer: the request is then authenticated as this
	// node's users stand.
	if err := s.users.WaitVersion(ctx, v); errors.Is(err, context.DeadlineExceeded) && r.Context().Err() == nil {
		s.usersWaits.stuck.Store(have + 1)
	}
}

// fromNode says r is marked as another cluster node's: forwarded, or
// asking for a share.
func fromNode(r *http.Request) bool {
	return r.Header.Get(ForwardedHeader) != "" ||
		(strings.Contains(r.URL.RawQuery, shareRev) && r.URL.Query().Has(shareRev))
}

// Route says where a request for a bucket's key is answered.
type Route struct {
	// Node is the name of the node leading the key's partition.
	Node string
	// Addr is that node's HTTP address (host:port); empty when this node
	// answers the request itself.
	Addr string
	// From is this node's name, sent in ForwardedHeader.
	From string
	// Barrier, when set on a Route without Addr (this node leads the
	// key's partition), confirms a read before this node answers it from
	// its memory (a read index: it still leads, and has applied every
	// write acknowledged before); its error answers the read instead
	// (wrapping engine.ErrNotMyVBucket or engine.ErrTempFail: 503).
	// Writes do not take it: the partition's log orders them.
	Barrier func(ctx context.Context) error
	// Reroute, when set on a Route with Addr, is asked for another route
	// of the same key: with leader "" when Node could not be reached (the
	// request was not sent), or with the node Node's refusal named
	// (LeaderHeader). Each is asked at most once a request. ok is false
	// when there is nowhere else to go: the request is then answered with
	// what the forward met. Set on a Route without Addr, it is asked with
	// the leader this node's own replication named when it refused the
	// request (engine.FollowableLeader: leadership moved since the route
	// was made), at most once a request, and the request goes there.
	Reroute func(ctx context.Context, leader string) (rt Route, ok bool)
	// Gone, when set on a Route with Addr, is closed once Node is known
	// to be down (its lease expired: cut off, or dead): a forward in
	// flight to it is then abandoned and answered 503, its outcome
	// unknown, rather than waited out.
	Gone <-chan struct{}
}

// errNodeGone is the cause of a forward abandoned because its node went
// down (Route.Gone).
var errNodeGone = errors.New("the node went down (its lease expired) while the request was in flight")

// forwardTimeout bounds a forwarded request's wait for the leader's
// answer to begin: longer than a replicated write's own bound (30 s), so
// the leader answers first.
const forwardTimeout = 45 * time.Second

// newForwardTransport is the transport forwarded requests share.
func newForwardTransport() *http.Transport {
	return &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: forwardTimeout,
		ExpectContinueTimeout: time.Second,
	}
}

// routed wraps a single-document handler: on a cluster node (Options.Route
// set) a request for a key whose partition another node leads is forwarded
// there; otherwise h answers it.
func (s *server) routed(h apiHandler) apiHandler {
	return func(w http.ResponseWriter, r *http.Request) error {
		if s.route == nil {
			return h(w, r)
		}
		bucket, err := pathVar(r, "bucket")
		if err != nil {
			return err
		}
		key, err := pathVar(r, "key")
		if err != nil {
			return err
		}
		if err := engine.ValidateKey(key); err != nil {
			return err
		}
		rt, err := s.route(r.Context(), bucket, key)
		if err != nil {
			return err
		}
		if rt.Addr == "" {
			return s.answerHere(w, r, rt, h)
		}
		if from := r.Header.Get(ForwardedHeader); from != "" {
			w.Header().Set(LeaderHeader, rt.Node)
			return fmt.Errorf("%w: key %q's partition is led by node %s at http://%s; this node does not lead it and does not forward a request forwarded already (by %s)",
				engine.ErrNotMyVBucket, key, rt.Node, rt.Addr, from)
		}
		if rt.Reroute != nil {
			if err := replayableBody(w, r); err != nil {
				return err
			}
		}
		s.forward(w, r, rt, rerouting{})
		return nil
	}
}

// answerHere answers r with h on this node, which its route says leads
// the key's partition (rt without Addr; a read takes rt's Barrier first).
// Leadership may have moved since: this node's replication then refuses
// the request naming the leader, before anything of it was proposed
// (engine.NotMyVBucketError, engine.FollowableLeader). A forwarded
// request's refusal names that leader in LeaderHeader, for the forwarding
// node to follow; a request the client sent here goes to that leader, as
// if the route had said so (rt.Reroute(leader), once: that leader's own
// refusal is the answer), its body kept in memory to be sent again.
func (s *server) answerHere(w http.ResponseWriter, r *http.Request, rt Route, h apiHandler) error {
	forwarded := r.Header.Get(ForwardedHeader) != ""
	if rt.Reroute != nil && !forwarded && r.Method == http.MethodPut {
		// The one body a handler here reads (a document's value); the
		// others are not read, and go with the request as they came.
		if err := replayableBody(w, r); err != nil {
			return err
		}
	}
	var err error
	if rt.Barrier != nil && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		err = rt.Barrier(r.Context())
	}
	if err == nil {
		err = h(w, r)
	}
	leader := engine.FollowableLeader(err)
	switch {
	case leader == "":
		return err
	case forwarded:
		w.Header().Set(LeaderHeader, leader)
		return err
	case rt.Reroute == nil:
		return err
	}
	nrt, ok := rt.Reroute(r.Context(), leader)
	if !ok || nrt.Addr == "" {
		return err
	}
	if r.GetBody != nil {
		body, gerr := r.GetBody()
		if gerr != nil {
			return err
		}
		r.Body = body
	}
	// This node's refusal counts as the one refusal followed.
	s.forward(w, r, nrt, rerouting{refused: true})
	return nil
}

// replayableBody reads r's body into memory (as readDocBody, the
// leader's limit checked here), so that a rerouted forward, or a forward
// after this node's own refusal, can send it again.
func replayableBody(w http.ResponseWriter, r *http.Request) error {
	if r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	if _, ok := r.Body.(*keptBody); ok {
		return nil
	}
	body, err := readDocBody(w, r)
	if err != nil {
		return err
	}
	r.ContentLength, r.TransferEncoding = int64(len(body)), nil
	r.GetBody = func() (io.ReadCloser, error) { return &keptBody{Reader: bytes.NewReader(body), b: body}, nil }
	r.Body, _ = r.GetBody()
	return nil
}

// keptBody is a request's body replayableBody kept in memory: a handler
// reading it whole (readDocBody) takes its bytes, not a copy of them.
type keptBody struct {
	*bytes.Reader
	b []byte
}

// Close closes nothing.
func (*keptBody) Close() error { return nil }

// take returns the whole body when none of it was read yet, and marks it
// read.
func (k *keptBody) take() ([]byte, bool) {
	if k.Len() != len(k.b) {
		return nil, false
	}
	k.Reset(nil)
	return k.b, true
}

// rerouting is what a forwarded request used of its routes' Reroute: each
// once at most, so that a request makes at most three sends.
type rerouting struct {
	unreachable, refused bool
}

// refusedBy is a forward's answer that refused the request, naming the
// partition's leader (LeaderHeader).
type refusedBy struct{ node, leader string }

func (e *refusedBy) Error() string {
	return fmt.Sprintf("node %s does not lead the key's partition; it names node %s as its leader", e.node, e.leader)
}

// notSent reports whether err is a forward's failure to reach its node:
// the request was not sent, so sending it elsewhere cannot apply it twice.
func notSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// forward sends r to the node rt names and copies its answer to w. A
// leader that cannot be reached (or answers nothing) is a temporary
// failure: a write's outcome may then be unknown. Before that, rt's
// Reroute is asked where else to go, as used says it may be.
func (s *server) forward(w http.ResponseWriter, r *http.Request, rt Route, used rerouting) {
	target := &url.URL{Scheme: "http", Host: rt.Addr}
	in := r // what a reroute sends again
	if rt.Gone != nil {
		ctx, cancel := context.WithCancelCause(r.Context())
		defer cancel(nil)
		go func() {
			select {
			case <-rt.Gone:
				cancel(errNodeGone)
			case <-ctx.Done():
			}
		}()
		r = r.WithContext(ctx)
	}
	next := func(leader string) bool {
		nrt, ok := rt.Reroute(in.Context(), leader)
		if !ok || nrt.Addr == "" {
			return false
		}
		if in.GetBody != nil {
			body, err := in.GetBody()
			if err != nil {
				return false
			}
			in.Body = body
		}
		s.forward(w, in, nrt, used)
		return true
	}
	p := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.SetXForwarded()
			from := rt.From
			if from == "" {
				from = "?"
			}
			pr.Out.Header.Set(ForwardedHeader, from)
			s.setUsersVersion(pr.Out.Header)
		},
		Transport: s.fwd,
		ModifyResponse: func(resp *http.Response) error {
			if l := resp.Header.Get(LeaderHeader); l != "" && resp.StatusCode == http.StatusServiceUnavailable && rt.Reroute != nil && !used.refused {
				return &refusedBy{node: rt.Node, leader: l}
			}
			resp.Header.Set(RoutedToHeader, rt.Node)
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			gone := context.Cause(r.Context()) == errNodeGone
			if !gone && errors.Is(err, context.Canceled) && r.Context().Err() != nil {
				return // the client left
			}
			var ref *refusedBy
			if errors.As(err, &ref) {
				used.refused = true
				if next(ref.leader) {
					return
				}
				writeError(w, fmt.Errorf("%w: key's partition is led by node %s (as node %s says), which this node cannot forward to", engine.ErrNotMyVBucket, ref.leader, ref.node))
				return
			}
			if notSent(err) && rt.Reroute != nil && !used.unreachable {
				used.unreachable = true
				if next("") {
					return
				}
			}
			if gone {
				err = errNodeGone
			}
			s.log.Warn("forwarding a request to its partition's leader", "leader", rt.Node, "addr", rt.Addr, "err", err)
			outcome := "a write's outcome is unknown"
			if notSent(err) && !gone {
				outcome = "the request was not sent: nothing was applied"
			}
			writeError(w, fmt.Errorf("%w: forwarding to the partition's leader, node %s at http://%s: %w (%s)",
				engine.ErrTempFail, rt.Node, rt.Addr, err, outcome))
		},
	}
	p.ServeHTTP(w, r)
}
