package httpapi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"

	"github.com/mayflydb/mayfly/views"
)

// A view query (rows or a forecast) asked of a cluster node whose view
// indexes are still opening (its bucket's design documents not loaded yet
// after a restart, or reattaching after a settings change: views' Prepare answers
// engine.ErrWarmup) cannot be merged there: the node does not have the
// design document's functions to re-reduce with, nor its parameters'
// checks. The node asks another coverer to merge it instead (relayView):
// that node scatters as for any query, and the warming node's own share
// is then one coverer's failure among the others, named in the answer's
// "errors" list, {"from":..,"reason":".. still opening its indexes"}, with
// the other nodes' rows (on_error=continue) or alone (on_error=stop), as
// a warming remote coverer always was. No other node's index holds the
// warming node's partitions (each partition is indexed by its coverer
// only), so no node could answer them sooner; stale=false keeps its
// meaning for every share answered. A single node, or a bucket without
// coverage, has no other copy to ask and answers 503 as before.

// relayHeadWait bounds, in connection_timeouts, how long a relayed query
// waits for the merging node's answer to begin: that node waits up to one
// connection_timeout for its coverers' first bytes.
const relayHeadWait = 2

// errRelayRefused is a merging node's temporary refusal (503) of a
// relayed query: the next coverer is asked.
var errRelayRefused = errors.New("the node refused the relayed view query (503)")

// errRelayHeadWait is the cause of a relayed query abandoned because the
// merging node's answer did not begin in time.
var errRelayHeadWait = errors.New("the merging node's answer did not begin in time")

// relayView answers r, a client's view query of bucket that this node
// could not prepare because its view indexes are still opening
// (engine.ErrWarmup), by sending it to another coverer of the bucket's
// views to merge, marked with ForwardedHeader (so that it is never relayed
// again), and passing that node's answer on as it comes (status, headers,
// body). Coverers are asked in the coverage's order; one that cannot be
// reached, or refuses (503: warming up too, saturated, shutting down), is
// passed over for the next. ok is false when no coverer answered (or none
// is to be asked: a single node, a query from another node):
// the caller answers its own error. Its body, read already, is sent again.
func (s *server) relayView(w http.ResponseWriter, r *http.Request, bucket string, p *views.Params, body []byte) (ok bool) {
	if s.coverage == nil || fromNode(r) {
		return false
	}
	ctx := r.Context()
	cov, err := s.coverage(ctx, bucket, 0)
	if err != nil || cov == nil {
		return false
	}
	self := "?"
	for _, c := range cov.Nodes {
		if c.Self {
			self = c.Name
		}
	}
	// One deadline for every node asked: a client does not wait a
	// connection_timeout per node. (Not one a node: a merging node may
	// itself wait a connection_timeout for a coverer's first bytes, so a
	// node's own bound could not be shorter than the whole.)
	hctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	head := time.AfterFunc(relayHeadWait*p.ConnectionTimeout(), func() { cancel(errRelayHeadWait) })
	defer head.Stop()
	transport := s.shares.Transport
	if transport == nil {
		transport = http.DefaultTransport
	}
	asked := map[string]bool{}
	for _, c := range cov.Nodes {
		if c.Self || c.URL == "" || asked[c.URL] {
			continue
		}
		asked[c.URL] = true
		target, err := url.Parse(c.URL)
		if err != nil {
			continue
		}
		var failed error
		proxy := &httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) {
				pr.SetURL(target)
				pr.SetXForwarded()
				pr.Out.Header.Set(ForwardedHeader, self)
				s.setUsersVersion(pr.Out.Header)
				pr.Out.Body, pr.Out.ContentLength, pr.Out.GetBody = http.NoBody, 0, nil
				if body != nil {
					// GetBody: the transport sends it again on a new
					// connection when a pooled one turns out closed.
					pr.Out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
					pr.Out.Body, _ = pr.Out.GetBody()
					pr.Out.ContentLength = int64(len(body))
				}
			},
			Transport:     transport,
			FlushInterval: -1, // the merged rows as they come
			ModifyResponse: func(resp *http.Response) error {
				if resp.StatusCode == http.StatusServiceUnavailable {
					return errRelayRefused
				}
				head.Stop() // the answer began: the client's context bounds the rest
				return nil
			},
			// Nothing was written to w: the next coverer is asked.
			ErrorHandler: func(_ http.ResponseWriter, _ *http.Request, err error) { failed = err },
		}
		proxy.ServeHTTP(w, r.WithContext(hctx))
		if failed == nil {
			return true
		}
		if ctx.Err() != nil {
			return true // the client left: nothing to answer
		}
		if cause := context.Cause(hctx); cause != nil {
			failed = cause
		}
		s.log.Info("views: relaying a query this node cannot merge while its indexes open", "bucket", bucket, "to", c.URL, "err", failed)
		if hctx.Err() != nil {
			return false
		}
	}
	return false
}
