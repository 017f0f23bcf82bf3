package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
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
// instead of forwarding it again.

// ForwardedHeader marks a request another node forwarded; its value is
// the forwarding node's name. A client may send it too: its request is
// then answered where it lands, never forwarded.
const ForwardedHeader = "X-Mayfly-Forwarded"

// RoutedToHeader, on the answer to a forwarded request, names the node
// that answered it (the partition's leader); the rest of the answer is
// that node's, unchanged.
const RoutedToHeader = "X-Mayfly-Routed-To"

// Route says where a request for a bucket's key is answered.
type Route struct {
	// Node is the name of the node leading the key's partition.
	Node string
	// Addr is that node's HTTP address (host:port); empty when this node
	// answers the request itself.
	Addr string
	// From is this node's name, sent in ForwardedHeader.
	From string
}

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
			return h(w, r)
		}
		if from := r.Header.Get(ForwardedHeader); from != "" {
			return fmt.Errorf("%w: key %q's partition is led by node %s at http://%s; this node does not lead it and does not forward a request forwarded already (by %s)",
				engine.ErrNotMyVBucket, key, rt.Node, rt.Addr, from)
		}
		s.forward(w, r, rt)
		return nil
	}
}

// forward sends r to the node rt names and copies its answer to w. A
// leader that cannot be reached (or answers nothing) is a temporary
// failure: a write's outcome may then be unknown.
func (s *server) forward(w http.ResponseWriter, r *http.Request, rt Route) {
	target := &url.URL{Scheme: "http", Host: rt.Addr}
	p := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.SetXForwarded()
			from := rt.From
			if from == "" {
				from = "?"
			}
			pr.Out.Header.Set(ForwardedHeader, from)
		},
		Transport: s.fwd,
		ModifyResponse: func(resp *http.Response) error {
			resp.Header.Set(RoutedToHeader, rt.Node)
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
				return // the client left
			}
			s.log.Warn("forwarding a request to its partition's leader", "leader", rt.Node, "addr", rt.Addr, "err", err)
			writeError(w, fmt.Errorf("%w: forwarding to the partition's leader, node %s at http://%s: %w (a write's outcome is unknown)",
				engine.ErrTempFail, rt.Node, rt.Addr, err))
		},
	}
	p.ServeHTTP(w, r)
}
