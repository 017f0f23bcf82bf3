package httpapi

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/mayflydb/mayfly/audit"
	"github.com/mayflydb/mayfly/engine"
)

// bucketJSON is a bucket as GET /pools/default/buckets/{bucket} shows it.
type bucketJSON struct {
	Name          string           `json:"name"`
	BucketType    string           `json:"bucketType"`
	MaxTTL        int64            `json:"maxTTL"`
	PurgeInterval float64          `json:"purgeInterval"`
	Quota         map[string]int64 `json:"quota"`
	BasicStats    map[string]int64 `json:"basicStats"`
	NumVBuckets   int              `json:"numVBuckets"`
	URI           string           `json:"uri"`
}

func bucketView(b *engine.Bucket) bucketJSON {
	s, st := b.Settings(), b.Stats()
	return bucketJSON{
		Name: s.Name, BucketType: string(s.Type), MaxTTL: s.MaxTTL, PurgeInterval: s.PurgeInterval,
		Quota:       map[string]int64{"ram": s.RAMQuotaMB << 20, "rawRAM": s.RAMQuotaMB << 20},
		BasicStats:  map[string]int64{"itemCount": st.CurrItems},
		NumVBuckets: b.NumPartitions(),
		URI:         "/pools/default/buckets/" + url.PathEscape(s.Name),
	}
}

func (s *server) listBuckets(w http.ResponseWriter, r *http.Request) {
	out := []bucketJSON{}
	p := principalOf(r)
	for _, b := range s.eng.Buckets() {
		if !p.SeesBucket(b.Name()) {
			continue // as Couchbase: only the buckets the caller has a role on
		}
		out = append(out, bucketView(b))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *server) getBucket(w http.ResponseWriter, r *http.Request) {
	b, err := s.bucketOf(r)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, bucketView(b))
}

// applyBucketParams sets the settings a request names. Only the fields a
// bucket can change after creation are read when creating is false.
func applyBucketParams(vals url.Values, st *engine.BucketSettings, creating bool) error {
	if v, ok, err := intParam(vals, "maxTTL"); err != nil {
		return err
	} else if ok {
		st.MaxTTL = v
	}
	if v, ok, err := intParam(vals, "ramQuotaMB"); err != nil {
		return err
	} else if ok {
		st.RAMQuotaMB = v
	}
	if vals.Has("purgeInterval") {
		f, err := strconv.ParseFloat(strings.TrimSpace(vals.Get("purgeInterval")), 64)
		if err != nil {
			return errBadRequest("purgeInterval: metadata purge interval must be a number")
		}
		st.PurgeInterval = f
	}
	if !creating {
		return nil
	}
	st.Name = vals.Get("name")
	switch t := vals.Get("bucketType"); t {
	case "", "couchbase", "membase":
		st.Type = engine.Couchbase
	case "ephemeral":
		st.Type = engine.Ephemeral
	case "memcached":
		st.Type = engine.Memcached
	default:
		return errBadRequest(fmt.Sprintf("bucketType: must be couchbase, ephemeral or memcached, got %q", t))
	}
	return nil
}

// createBucket handles POST /pools/default/buckets (name, bucketType, maxTTL,
// ramQuotaMB, purgeInterval), answering 202 as Couchbase does.
func (s *server) createBucket(w http.ResponseWriter, r *http.Request) {
	vals, err := formParams(r)
	if err != nil {
		writeError(w, err)
		return
	}
	if vals.Get("name") == "" {
		writeError(w, errBadRequest("name: bucket name cannot be empty"))
		return
	}
	st := engine.DefaultBucketSettings("")
	if err := applyBucketParams(vals, &st, true); err != nil {
		writeError(w, err)
		return
	}
	b, err := s.eng.CreateBucket(r.Context(), st)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, bucketView(b))
}

// updateBucket handles POST /pools/default/buckets/{bucket}: maxTTL,
// ramQuotaMB, purgeInterval.
func (s *server) updateBucket(w http.ResponseWriter, r *http.Request) {
	b, vals, err := s.bucketForm(r)
	if err != nil {
		writeError(w, err)
		return
	}
	old, updated, err := b.UpdateSettings(r.Context(), func(st *engine.BucketSettings) error {
		return applyBucketParams(vals, st, false)
	})
	if err != nil {
		writeError(w, err)
		return
	}
	if old.MaxTTL != updated.MaxTTL {
		s.audit(r, audit.Event{Time: s.eng.Clock().Now(), Bucket: b.Name(), Setting: "maxTTL", Old: old.MaxTTL, New: updated.MaxTTL})
	}
	writeJSON(w, http.StatusOK, bucketView(b))
}

func (s *server) deleteBucket(w http.ResponseWriter, r *http.Request) {
	name, err := pathVar(r, "bucket")
	if err != nil {
		writeError(w, err)
		return
	}
	if err := s.eng.DeleteBucket(r.Context(), name); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
}

// scopesJSON is Couchbase's GET .../scopes shape.
type scopesJSON struct {
	Scopes []scopeJSON `json:"scopes"`
}

type scopeJSON struct {
	Name        string           `json:"name"`
	Collections []collectionJSON `json:"collections"`
}

type collectionJSON struct {
	Name   string `json:"name"`
	UID    string `json:"uid"`
	MaxTTL int64  `json:"maxTTL"`
}

func (s *server) listScopes(w http.ResponseWriter, r *http.Request) {
	b, err := s.bucketOf(r)
	if err != nil {
		writeError(w, err)
		return
	}
	out := scopesJSON{Scopes: []scopeJSON{}}
	for _, sc := range b.Scopes() {
		sj := scopeJSON{Name: sc.Name, Collections: []collectionJSON{}}
		for _, c := range sc.Collections {
			sj.Collections = append(sj.Collections, collectionJSON{Name: c.Name, UID: strconv.FormatUint(uint64(c.ID), 16), MaxTTL: c.MaxTTL})
		}
		out.Scopes = append(out.Scopes, sj)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *server) createScope(w http.ResponseWriter, r *http.Request) {
	b, vals, err := s.bucketForm(r)
	if err != nil {
		writeError(w, err)
		return
	}
	if err := b.CreateScope(r.Context(), vals.Get("name")); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"name": vals.Get("name")})
}

func (s *server) createCollection(w http.ResponseWriter, r *http.Request) {
	b, err := s.bucketOf(r)
	if err != nil {
		writeError(w, err)
		return
	}
	scope, err := pathVar(r, "scope")
	if err != nil {
		writeError(w, err)
		return
	}
	vals, err := formParams(r)
	if err != nil {
		writeError(w, err)
		return
	}
	maxTTL, _, err := intParam(vals, "maxTTL")
	if err != nil {
		writeError(w, err)
		return
	}
	ci, err := b.CreateCollection(r.Context(), scope, vals.Get("name"), maxTTL)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, collectionJSON{Name: ci.Name, UID: strconv.FormatUint(uint64(ci.ID), 16), MaxTTL: ci.MaxTTL})
}
