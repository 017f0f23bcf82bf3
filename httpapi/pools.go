package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/internal/clusterconfig"
)

// The cluster configuration as Couchbase serves it over HTTP, enough for an
// SDK to bootstrap from the management port and for its bucket manager to
// read a bucket: /pools, /pools/default, /pools/default/nodeServices,
// /pools/default/b/{bucket} (terse) and its stream /pools/default/bs/{bucket},
// the configuration fields of /pools/default/buckets[/{bucket}] and its
// stream /pools/default/bucketsStreaming/{bucket}. The shapes are built in
// internal/clusterconfig, as the KV port's GET_CLUSTER_CONFIG is.

// configHost is the host name the configuration gives clients: the one
// they asked for.
func configHost(r *http.Request) string {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return host
}

// getPools handles GET /pools.
func (s *server) getPools(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, clusterconfig.Pools(principalOf(r).Allows(auth.Permission{Action: auth.SecurityWrite})))
	return nil
}

// ClusterView is what GET /pools/default shows of a cluster beyond the
// node asked (Options.Cluster).
type ClusterView struct {
	// Nodes are the other nodes, after this one in "nodes": each
	// "healthy" while it holds its lease, "unhealthy" otherwise.
	Nodes []clusterconfig.Node
	// Balanced is Couchbase's "balanced": false while a partition is
	// degraded or has no leader, or a replica lags.
	Balanced bool
	// Status is the cluster's state as `mayfly cluster status --json`
	// prints it (nodes up and down, the orchestrator, partitions led and
	// held per node, degraded partitions, lagging replicas), shown as
	// "mayflyCluster": the web console's Cluster page reads it. It names
	// only the buckets the caller sees (Options.Cluster).
	Status any
}

// getPoolsDefault handles GET /pools/default. In a cluster, the other
// nodes follow this one, as the cluster's etcd lists them, and
// "mayflyCluster" holds the cluster's state (ClusterView), naming only the
// buckets the caller has a role on, as GET /pools/default/buckets lists
// only those.
func (s *server) getPoolsDefault(w http.ResponseWriter, r *http.Request) error {
	out := clusterconfig.Default(configHost(r), s.ports)
	if s.cluster != nil {
		cv, err := s.cluster(r.Context(), principalOf(r).SeesBucket)
		if err != nil {
			return err
		}
		out["nodes"] = append(out["nodes"].([]clusterconfig.Node), cv.Nodes...)
		out["balanced"] = cv.Balanced
		if cv.Status != nil {
			out["mayflyCluster"] = cv.Status
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// getNodeServices handles GET /pools/default/nodeServices: on a cluster
// node, every node's services (Options.Topology's nodes).
func (s *server) getNodeServices(w http.ResponseWriter, r *http.Request) error {
	var t *clusterconfig.Topology
	if s.topology != nil {
		var err error
		if t, err = s.topology(r.Context(), ""); err != nil {
			s.log.Warn("the cluster's nodes for nodeServices", "err", err)
		}
	}
	writeJSON(w, http.StatusOK, clusterconfig.NodeServices(t, configHost(r), s.ports))
	return nil
}

// getTerseBucket handles GET /pools/default/b/{bucket}: the terse bucket
// configuration.
func (s *server) getTerseBucket(w http.ResponseWriter, r *http.Request) error {
	b, err := s.bucketOf(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.terse(r, b))
	return nil
}

// bucketConfigView is a bucket as GET /pools/default/buckets[/{bucket}]
// shows it: Mayfly's settings and statistics with the configuration fields
// (uuid, nodeLocator, vBucketServerMap, nodes, ...) Couchbase adds.
func (s *server) bucketConfigView(b *engine.Bucket, r *http.Request) (map[string]json.RawMessage, error) {
	out := map[string]json.RawMessage{}
	bv := bucketView(b, s.history)
	if n, ok := s.clusterItems(r, b); ok {
		bv.BasicStats.ItemCount = n
	}
	for _, part := range []any{s.terse(r, b), bv} {
		raw, err := json.Marshal(part)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(raw, &out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// getBucketConfig handles GET /pools/default/buckets/{bucket}; on a
// cluster node, with a share request's parameters, it answers this node's
// share of the bucket's item count (clusterItems).
func (s *server) getBucketConfig(w http.ResponseWriter, r *http.Request) error {
	b, err := s.bucketOf(r)
	if err != nil {
		return err
	}
	if s.coverage != nil && r.URL.Query().Has(shareRev) {
		in, _, err := s.shareAsked(r, b, s.copies)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]int64{"total_rows": b.ItemsIn(in)})
		return nil
	}
	v, err := s.bucketConfigView(b, r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

// listBucketConfigs handles GET /pools/default/buckets: the buckets the
// caller has a role on, as getBucketConfig shows each. On a cluster node
// each bucket's item count asks the other nodes (clusterItems), so the
// buckets are shown concurrently, up to listConfigsAtOnce at a time: a
// node that does not answer costs the list one clusterItemsTimeout, not
// one per bucket.
func (s *server) listBucketConfigs(w http.ResponseWriter, r *http.Request) error {
	p := principalOf(r)
	var bs []*engine.Bucket
	for _, b := range s.eng.Buckets() {
		if p.SeesBucket(b.Name()) {
			bs = append(bs, b)
		}
	}
	out := make([]map[string]json.RawMessage, len(bs))
	errs := make([]error, len(bs))
	slots := make(chan struct{}, listConfigsAtOnce)
	var wg sync.WaitGroup
	for i, b := range bs {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			out[i], errs[i] = s.bucketConfigView(b, r)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// listConfigsAtOnce bounds how many buckets GET /pools/default/buckets
// shows at once.
const listConfigsAtOnce = 16

// Configuration streams (/pools/default/bs/{bucket} and
// /pools/default/bucketsStreaming/{bucket}), as Couchbase serves them to SDKs
// that bootstrap over HTTP: the configuration at once, then a new one each
// time it changes (the bucket's settings, its collections manifest), each
// followed by four newlines, on one chunked answer that stays open until the
// client goes, the bucket is deleted or the server shuts down.
const (
	// MaxConfigStreams caps the configuration streams open at once; one
	// more is answered 503. Each holds a stream token of its user's and
	// the server's (Options.MaxStreamsPerUser, MaxStreams), one goroutine
	// and the last configuration it sent; its request slot only until the
	// stream has begun.
	MaxConfigStreams = 64
	// configStreamPoll is how often a stream compares the collections
	// manifest's uid with the one it last sent (settings changes are told
	// at once, by engine.Bucket.WatchSettings).
	configStreamPoll = 250 * time.Millisecond
	// configWriteStall is how long one configuration may take to be
	// written: a client that reads none for that long loses its stream.
	configWriteStall = 30 * time.Second
)

// configSeparator ends each configuration of a stream.
const configSeparator = "\n\n\n\n"

// errTooManyStreams answers a stream over MaxConfigStreams.
var errTooManyStreams = &httpError{status: http.StatusServiceUnavailable, code: "temporary_failure",
	reason: "too many configuration streams open; try again later"}

// streamTerseBucket handles GET /pools/default/bs/{bucket}.
func (s *server) streamTerseBucket(w http.ResponseWriter, r *http.Request) error {
	return s.streamConfig(w, r, func(b *engine.Bucket) (any, error) {
		return s.terse(r, b), nil
	})
}

// streamBucketConfig handles GET /pools/default/bucketsStreaming/{bucket}.
func (s *server) streamBucketConfig(w http.ResponseWriter, r *http.Request) error {
	return s.streamConfig(w, r, func(b *engine.Bucket) (any, error) {
		return s.bucketConfigView(b, r)
	})
}

// streamConfig streams the configurations build makes of the request's
// bucket, a new one whenever it differs from the last sent.
func (s *server) streamConfig(w http.ResponseWriter, r *http.Request, build func(*engine.Bucket) (any, error)) error {
	b, err := s.bucketOf(r)
	if err != nil {
		return err
	}
	select {
	case s.streams <- struct{}{}:
		defer func() { <-s.streams }()
	default:
		return errTooManyStreams
	}
	changed := make(chan struct{}, 1)
	stop := b.WatchSettings(func(_, _ engine.BucketSettings) {
		select {
		case changed <- struct{}{}:
		default: // one pending wake-up is enough
		}
	})
	defer stop()
	tick := time.NewTicker(configStreamPoll)
	defer tick.Stop()

	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	streamEstablished(r) // an open stream holds no request slot
	var last []byte
	manifest := b.ManifestUID()
	for {
		v, err := build(b)
		if err == nil {
			var raw []byte
			if raw, err = json.Marshal(v); err == nil && !bytes.Equal(raw, last) {
				err = writeConfig(w, rc, raw)
				last = raw
			}
		}
		if err != nil {
			if r.Context().Err() == nil {
				s.log.Debug("configuration stream ended", "bucket", b.Name(), "err", err)
			}
			return nil // the answer has begun: nothing more to say
		}
		for wake := false; !wake; {
			select {
			case <-r.Context().Done():
				return nil
			case <-changed:
				wake = true
			case <-tick.C:
				if cur, err := s.eng.Bucket(b.Name()); err != nil || cur != b {
					return nil // the bucket was deleted (and perhaps made again)
				}
				if m := b.ManifestUID(); m != manifest {
					manifest, wake = m, true
				}
			}
		}
	}
}

// writeConfig writes one configuration of a stream and sends it, within
// configWriteStall; between configurations the connection has no write
// deadline, as a stream stays open for as long as the client wants.
func writeConfig(w http.ResponseWriter, rc *http.ResponseController, raw []byte) error {
	if err := rc.SetWriteDeadline(time.Now().Add(configWriteStall)); err != nil && !errors.Is(err, http.ErrNotSupported) { // wall clock: a network deadline
		return err
	}
	if _, err := w.Write(raw); err != nil {
		return err
	}
	if _, err := io.WriteString(w, configSeparator); err != nil {
		return err
	}
	if err := rc.Flush(); err != nil {
		return err
	}
	if err := rc.SetWriteDeadline(time.Time{}); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// terse is b's terse configuration as this node serves it to r: on a
// cluster node laid out over the cluster (Options.Topology).
func (s *server) terse(r *http.Request, b *engine.Bucket) *clusterconfig.Bucket {
	host := configHost(r)
	c := clusterconfig.Terse(b, host, s.ports)
	if s.topology == nil {
		return c
	}
	t, err := s.topology(r.Context(), b.Name())
	if err != nil {
		s.log.Warn("the cluster's layout of a bucket's configuration", "bucket", b.Name(), "err", err)
	}
	return c.WithTopology(t, host, s.ports)
}

// clusterItemsTimeout bounds how long a bucket's configuration waits for
// the other nodes' item counts.
const clusterItemsTimeout = 5 * time.Second

// clusterItems is a cluster bucket's item count, Couchbase's
// basicStats.itemCount: each partition's documents counted once, by the
// node covering it (as for a view), where this node's curr_items counts
// the copies it holds (all of the bucket's with three nodes, three
// quarters with four). ok is false on a single node, before the bucket has
// a coverage, or when a node does not answer in time: the answer then
// shows this node's count.
func (s *server) clusterItems(r *http.Request, b *engine.Bucket) (int64, bool) {
	if s.coverage == nil {
		return 0, false
	}
	ctx, cancel := context.WithTimeout(r.Context(), clusterItemsTimeout)
	defer cancel()
	// A share request to the bucket's configuration, whatever route asked.
	sr := r.Clone(ctx)
	sr.Method = http.MethodGet
	sr.URL = &url.URL{Path: "/pools/default/buckets/" + b.Name()}
	local := func(in []bool) ([]byte, error) {
		return []byte(`{"total_rows":` + strconv.FormatInt(b.ItemsIn(in), 10) + `}`), nil
	}
	var n int64
	ok, err := s.overCoverage(ctx, b, s.copies, func(cov *ViewCoverage) error {
		shares, err := s.scatterListing(ctx, sr, b, cov, clusterItemsTimeout, nil, local)
		if err != nil {
			return err
		}
		for _, sh := range shares {
			n += sh.Get("total_rows").Int()
		}
		return nil
	})
	return n, ok && err == nil
}
