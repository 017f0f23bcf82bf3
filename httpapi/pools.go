package httpapi

import (
	"encoding/json"
	"net"
	"net/http"

	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/internal/clusterconfig"
)

// The cluster configuration as Couchbase serves it over HTTP, enough for an
// SDK to bootstrap from the management port and for its bucket manager to
// read a bucket: /pools, /pools/default, /pools/default/nodeServices,
// /pools/default/b/{bucket} (terse) and the configuration fields of
// /pools/default/buckets[/{bucket}]. The shapes are built in
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

// getPoolsDefault handles GET /pools/default.
func (s *server) getPoolsDefault(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, clusterconfig.Default(configHost(r), s.ports))
	return nil
}

// getNodeServices handles GET /pools/default/nodeServices.
func (s *server) getNodeServices(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, clusterconfig.NodeServices(configHost(r), s.ports))
	return nil
}

// getTerseBucket handles GET /pools/default/b/{bucket}: the terse bucket
// configuration.
func (s *server) getTerseBucket(w http.ResponseWriter, r *http.Request) error {
	b, err := s.bucketOf(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, clusterconfig.Terse(b, configHost(r), s.ports))
	return nil
}

// bucketConfigView is a bucket as GET /pools/default/buckets[/{bucket}]
// shows it: Mayfly's settings and statistics with the configuration fields
// (uuid, nodeLocator, vBucketServerMap, nodes, ...) Couchbase adds.
func (s *server) bucketConfigView(b *engine.Bucket, r *http.Request) (map[string]json.RawMessage, error) {
	out := map[string]json.RawMessage{}
	for _, part := range []any{clusterconfig.Terse(b, configHost(r), s.ports), bucketView(b)} {
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

// getBucketConfig handles GET /pools/default/buckets/{bucket}.
func (s *server) getBucketConfig(w http.ResponseWriter, r *http.Request) error {
	b, err := s.bucketOf(r)
	if err != nil {
		return err
	}
	v, err := s.bucketConfigView(b, r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

// listBucketConfigs handles GET /pools/default/buckets: the buckets the
// caller has a role on, as getBucketConfig shows each.
func (s *server) listBucketConfigs(w http.ResponseWriter, r *http.Request) error {
	out := []map[string]json.RawMessage{}
	p := principalOf(r)
	for _, b := range s.eng.Buckets() {
		if !p.SeesBucket(b.Name()) {
			continue
		}
		v, err := s.bucketConfigView(b, r)
		if err != nil {
			return err
		}
		out = append(out, v)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
