package httpapi

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/gorilla/mux"

	"github.com/mayflydb/mayfly/audit"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/internal/clusterconfig"
	"github.com/mayflydb/mayfly/internal/reason"
)

// bucketJSON is a bucket as GET /pools/default/buckets/{bucket} shows it.
type bucketJSON struct {
	Name string `json:"name"`
	// BucketType is Couchbase's REST name of the type: "membase" for a
	// couchbase bucket (the SDKs' bucket managers read that), "ephemeral"
	// or "memcached".
	BucketType    string           `json:"bucketType"`
	MaxTTL        int64            `json:"maxTTL"`
	PurgeInterval float64          `json:"purgeInterval"`
	Quota         map[string]int64 `json:"quota"`
	// EvictionPolicy is absent for a memcached bucket, as Couchbase shows it.
	EvictionPolicy string `json:"evictionPolicy,omitempty"`
	// DurabilityMinLevel is absent for a memcached bucket, as Couchbase
	// shows it.
	DurabilityMinLevel string `json:"durabilityMinLevel,omitempty"`
	// StorageBackend is the store that keeps a couchbase bucket, "pebble"
	// or "bolt" where Couchbase says couchstore or magma; absent for the
	// buckets that keep nothing on disk.
	StorageBackend string `json:"storageBackend,omitempty"`
	// Controllers holds flush, the flush route, only when the bucket's
	// flushEnabled is set, as Couchbase shows it (SDKs read a bucket's
	// flushEnabled from it).
	Controllers map[string]string `json:"controllers,omitempty"`
	BasicStats  basicStatsJSON    `json:"basicStats"`
	NumVBuckets int               `json:"numVBuckets"`
	// ReplicaNumber is the bucket's replicaNumber (an SDK's GetBucket
	// reads it): on a cluster, each partition has this many copies beside
	// its active one.
	ReplicaNumber int    `json:"replicaNumber"`
	URI           string `json:"uri"`
}

// basicStatsJSON is a bucket's basicStats as Couchbase gives them, which
// monitoring tools read (Couchbase's rates are its last sample's; these
// are over the StatsHistory's last interval, 3 s).
type basicStatsJSON struct {
	// QuotaPercentUsed is memUsed as a percentage of the RAM quota, at
	// most 100 as Couchbase caps it.
	QuotaPercentUsed float64 `json:"quotaPercentUsed"`
	// OpsPerSec is the bucket's mutations per second (writes, deletions,
	// expirations: its change feed's sequence numbers); reads are not
	// counted. 0 without a StatsHistory.
	OpsPerSec float64 `json:"opsPerSec"`
	// DiskFetches is ep_bg_fetched per second: values read back from disk
	// because memory did not hold them.
	DiskFetches float64 `json:"diskFetches"`
	// ItemCount is curr_items (on a cluster, each partition's documents
	// once: clusterItems).
	ItemCount int64 `json:"itemCount"`
	// DiskUsed is the bytes of the bucket's files (store and indexes);
	// DataUsed the same less the store's full-disk reserve.
	DiskUsed int64 `json:"diskUsed"`
	DataUsed int64 `json:"dataUsed"`
	// MemUsed is mem_used.
	MemUsed int64 `json:"memUsed"`
	// VBActiveNumNonResident counts the live documents whose value is not
	// in memory (ep_num_non_resident).
	VBActiveNumNonResident int64 `json:"vbActiveNumNonResident"`
}

// bucketView is b as the REST API shows it, its rates from h (nil: none).
func bucketView(b *engine.Bucket, h *StatsHistory) bucketJSON {
	s, st := b.Settings(), b.Stats()
	disk, data := b.DiskUsage()
	ops, fetches := h.rates(bucketID{b.Name(), s.UUID})
	quota := s.RAMQuotaMB << 20
	pct := 0.0
	if quota > 0 {
		pct = min(100, float64(st.MemUsed)*100/float64(quota))
	}
	return bucketJSON{
		Name: s.Name, BucketType: restBucketType(s.Type), MaxTTL: s.MaxTTL, PurgeInterval: s.PurgeInterval,
		Quota:              map[string]int64{"ram": s.RAMQuotaMB << 20, "rawRAM": s.RAMQuotaMB << 20},
		EvictionPolicy:     string(s.EvictionPolicy),
		DurabilityMinLevel: durabilityShown(s),
		StorageBackend:     b.StorageBackend(),
		BasicStats: basicStatsJSON{
			QuotaPercentUsed: pct, OpsPerSec: ops, DiskFetches: fetches, ItemCount: st.CurrItems,
			DiskUsed: disk, DataUsed: data, MemUsed: st.MemUsed, VBActiveNumNonResident: st.NonResident,
		},
		NumVBuckets:   b.NumPartitions(),
		ReplicaNumber: s.ReplicaNumber.Or(0),
		URI:           "/pools/default/buckets/" + url.PathEscape(s.Name),
		Controllers:   flushController(s),
	}
}

// flushController is a bucket's controllers as Couchbase shows them: the
// flush route when flushEnabled, else none.
func flushController(s engine.BucketSettings) map[string]string {
	if !s.FlushEnabled {
		return nil
	}
	return map[string]string{"flush": "/pools/default/buckets/" + url.PathEscape(s.Name) + "/controller/doFlush"}
}

// durabilityShown is a bucket's durabilityMinLevel as Couchbase shows it:
// absent for a memcached bucket.
func durabilityShown(s engine.BucketSettings) string {
	if s.Type == engine.Memcached {
		return ""
	}
	return string(s.DurabilityMinLevel)
}

// restBucketType is t as Couchbase's REST API names it: a couchbase bucket
// is "membase" there (and a create accepts either name).
func restBucketType(t engine.BucketType) string {
	if t == engine.Couchbase {
		return "membase"
	}
	return string(t)
}

func (s *server) listBuckets(w http.ResponseWriter, r *http.Request) error {
	out := []bucketJSON{}
	p := principalOf(r)
	for _, b := range s.eng.Buckets() {
		if !p.SeesBucket(b.Name()) {
			continue // as Couchbase: only the buckets the caller has a role on
		}
		out = append(out, bucketView(b, s.history))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *server) getBucket(w http.ResponseWriter, r *http.Request) error {
	b, err := s.bucketOf(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, bucketView(b, s.history))
	return nil
}

// applyBucketParams sets the settings a request names. Only the fields a
// bucket can change after creation are read when creating is false.
func applyBucketParams(vals url.Values, st *engine.BucketSettings, creating bool) error {
	// gocb's bucket manager sends maxTTL twice when a bucket read back is
	// updated: its deprecated MaxTTL (as read) and then MaxExpiry (as set).
	// The last one counts.
	if v := vals["maxTTL"]; len(v) > 1 {
		vals = maps.Clone(vals)
		vals["maxTTL"] = v[len(v)-1:]
	}
	if v, ok, err := intParam(vals, "maxTTL"); err != nil {
		return settingErr("maxTTL", "must be an integer, got %q", vals.Get("maxTTL"))
	} else if ok {
		st.MaxTTL = v
	}
	// Couchbase's REST calls it ramQuota (MiB); older clients send ramQuotaMB.
	for _, name := range []string{"ramQuotaMB", "ramQuota"} {
		if v, ok, err := intParam(vals, name); err != nil {
			return settingErr(name, "The RAM quota must be a number (MiB), got %q", vals.Get(name))
		} else if ok && (v < 1 || v > engine.MaxRAMQuotaMB) {
			// Refused here, under the name the request gave, rather than by
			// Validate's ramQuotaMB: a client sending ramQuota reads its error
			// there.
			return settingErr(name, "The RAM quota must be from 1 to %d MiB, got %d", engine.MaxRAMQuotaMB, v)
		} else if ok {
			st.SetRAMQuotaMB(v) // water marks set keep their share of it
		}
	}
	if vals.Has("purgeInterval") {
		f, err := strconv.ParseFloat(strings.TrimSpace(vals.Get("purgeInterval")), 64)
		if err != nil {
			return settingErr("purgeInterval", "metadata purge interval must be a number")
		}
		st.PurgeInterval = f
	}
	// Both take their names alone: an empty one (a form sending every
	// field) is refused, not stored as "the default" the engine reads ""
	// as only when a bucket opens.
	if vals.Has("evictionPolicy") {
		if strings.TrimSpace(vals.Get("evictionPolicy")) == "" {
			return settingErr("evictionPolicy", "Eviction policy must be valueOnly or fullEviction (couchbase buckets), noEviction or nruEviction (ephemeral buckets), got an empty value")
		}
		st.EvictionPolicy = engine.EvictionPolicy(vals.Get("evictionPolicy"))
	}
	if vals.Has("durabilityMinLevel") {
		if strings.TrimSpace(vals.Get("durabilityMinLevel")) == "" {
			return settingErr("durabilityMinLevel", "Durability minimum level must be either none, majority, majorityAndPersistActive, or persistToMajority")
		}
		st.DurabilityMinLevel = engine.Durability(vals.Get("durabilityMinLevel"))
	}
	if vals.Has("flushEnabled") {
		switch strings.TrimSpace(vals.Get("flushEnabled")) {
		case "0", "false":
			st.FlushEnabled = false
		case "1", "true":
			st.FlushEnabled = true
		default:
			return settingErr("flushEnabled", "flushEnabled can only be 1 or 0")
		}
	}
	// numVBuckets (Couchbase's, for magma buckets: 128 or 1024; here any
	// from 1 to 1024) is fixed when the bucket is created: an update may
	// repeat it (a bucket read back and sent again), never change it.
	if v, ok, err := intParam(vals, "numVBuckets"); err != nil || ok && (v < 1 || v > engine.MaxVBuckets) {
		return settingErr("numVBuckets", "must be an integer between 1 and %d", engine.MaxVBuckets)
	} else if ok {
		if !creating && int(v) != st.NumVBuckets {
			return settingErr("numVBuckets", "the number of vBuckets cannot be changed")
		}
		st.NumVBuckets = int(v)
	}
	// replicaNumber, 0..3 (Couchbase's range; Validate reports one outside
	// it): without it a new bucket takes the engine's default (1, as
	// Couchbase's; a cluster's 2), and an update keeps the bucket's. On a
	// cluster a change adds or removes copies (cluster.UpdateBucket); on a
	// single node it is kept, with no effect.
	if vals.Has("replicaNumber") {
		n, err := strconv.Atoi(strings.TrimSpace(vals.Get("replicaNumber")))
		if err != nil {
			return settingErr("replicaNumber", "The replica number must be specified and must be a non-negative integer.")
		}
		st.ReplicaNumber = engine.Replicas(n)
	}
	var typ engine.BucketType
	switch t := vals.Get("bucketType"); t {
	case "", "couchbase", "membase":
		typ = engine.Couchbase
	case "ephemeral":
		typ = engine.Ephemeral
	case "memcached":
		typ = engine.Memcached
	default:
		return settingErr("bucketType", "must be couchbase, ephemeral or memcached, got %q", t)
	}
	if !creating {
		// An update may repeat the type (an SDK's UpdateBucket sends what
		// it read), never change it.
		if vals.Has("bucketType") && typ != st.Type {
			return settingErr("bucketType", "a bucket's type cannot be changed (it is %s)", st.Type)
		}
		return nil
	}
	st.Name = vals.Get("name")
	st.Type = typ
	return nil
}

// createBucket handles POST /pools/default/buckets (name, bucketType, maxTTL,
// ramQuotaMB, purgeInterval, numVBuckets, replicaNumber and the rest of
// applyBucketParams), answering 202 as Couchbase does.
func (s *server) createBucket(w http.ResponseWriter, r *http.Request) error {
	vals, err := formParams(r)
	if err != nil {
		return err
	}
	if vals.Get("name") == "" {
		return settingErr("name", "Bucket name cannot be empty")
	}
	st := engine.DefaultBucketSettings("")
	if err := applyBucketParams(vals, &st, true); err != nil {
		return err
	}
	if err := st.Validate(); err != nil {
		return &bucketSettingError{err}
	}
	if _, err := s.eng.Bucket(st.Name); err == nil {
		return fmt.Errorf("%w: %q", engine.ErrBucketExists, st.Name)
	}
	in, err := s.intend(r, audit.Event{Action: audit.ActionBucketCreate, Bucket: st.Name, After: st})
	if err != nil {
		return err
	}
	b, err := s.eng.CreateBucket(r.Context(), st)
	if err != nil {
		s.settle(r, in, err)
		return err
	}
	writeJSON(w, http.StatusAccepted, bucketView(b, s.history))
	return nil
}

// updateBucket handles POST /pools/default/buckets/{bucket}: maxTTL,
// ramQuotaMB, purgeInterval and the rest of applyBucketParams; a change of a
// couchbase bucket's evictionPolicy restarts the bucket (engine reopen.go).
func (s *server) updateBucket(w http.ResponseWriter, r *http.Request) error {
	b, vals, err := s.bucketForm(r)
	if err != nil {
		return err
	}
	if _, err := s.changeSettings(r, b, func(st *engine.BucketSettings) error {
		return applyBucketParams(vals, st, false)
	}); err != nil {
		return err
	}
	if nb := b.Reopened(); nb != nil {
		// A change of evictionPolicy restarted the bucket (as Couchbase
		// does): answer with the new one, warming up with the new policy.
		b = nb
	}
	writeJSON(w, http.StatusOK, bucketView(b, s.history))
	return nil
}

// changeSettings changes bucket b's settings by change, validates them
// and records the change in the audit log, inside UpdateSettings (under
// the bucket's lock, once validated and before it is committed, so the
// record's before is exact), and returns the settings after it. A change
// that changes nothing is not recorded.
func (s *server) changeSettings(r *http.Request, b *engine.Bucket, change func(*engine.BucketSettings) error) (engine.BucketSettings, error) {
	var in audit.Intent
	var intended bool
	_, updated, err := b.UpdateSettings(r.Context(), func(st *engine.BucketSettings) error {
		old := *st
		if err := change(st); err != nil {
			return err
		}
		if err := st.Validate(); err != nil {
			return &bucketSettingError{err}
		}
		before, after := settingsDiff(old, *st)
		if len(after) == 0 {
			return nil
		}
		var err error
		if in, err = s.intend(r, audit.Event{Action: audit.ActionBucketSettings, Bucket: old.Name, Before: before, After: after}); err != nil {
			return err
		}
		intended = true
		return nil
	})
	if err != nil && intended {
		s.settle(r, in, err)
	}
	return updated, err
}

func (s *server) deleteBucket(w http.ResponseWriter, r *http.Request) error {
	name, err := pathVar(r, "bucket")
	if err != nil {
		return err
	}
	b, err := s.eng.Bucket(name)
	if err != nil {
		return err
	}
	in, err := s.intend(r, audit.Event{Action: audit.ActionBucketDelete, Bucket: name, Before: b.Settings()})
	if err != nil {
		return err
	}
	if err := s.eng.DeleteBucket(r.Context(), name); err != nil {
		s.settle(r, in, err)
		return err
	}
	if s.runs != nil {
		s.runs.forget(name)
	}
	writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
	return nil
}

// settingsDiff returns the settings that differ, by their API names: their
// values before and after.
func settingsDiff(old, updated engine.BucketSettings) (before, after map[string]any) {
	before, after = map[string]any{}, map[string]any{}
	add := func(name string, o, n any) {
		if o != n {
			before[name], after[name] = o, n
		}
	}
	add("maxTTL", old.MaxTTL, updated.MaxTTL)
	add("ramQuotaMB", old.RAMQuotaMB, updated.RAMQuotaMB)
	add("purgeInterval", old.PurgeInterval, updated.PurgeInterval)
	add("exp_pager_stime", old.ExpPagerStime, updated.ExpPagerStime)
	add("exp_pager_initial_run_time", old.ExpPagerInitialRunTime, updated.ExpPagerInitialRunTime)
	add("mem_high_wat", old.MemHighWat, updated.MemHighWat)
	add("mem_low_wat", old.MemLowWat, updated.MemLowWat)
	add("evictionPolicy", old.EvictionPolicy, updated.EvictionPolicy)
	add("durabilityMinLevel", old.DurabilityMinLevel, updated.DurabilityMinLevel)
	add("flushEnabled", old.FlushEnabled, updated.FlushEnabled)
	add("replicaNumber", old.ReplicaNumber, updated.ReplicaNumber)
	return before, after
}

// scopesJSON is Couchbase's GET .../scopes shape.
type scopesJSON struct {
	// UID is the collections manifest's, in hexadecimal (as Couchbase).
	UID    string      `json:"uid"`
	Scopes []scopeJSON `json:"scopes"`
}

type scopeJSON struct {
	Name        string           `json:"name"`
	UID         string           `json:"uid"`
	Collections []collectionJSON `json:"collections"`
}

type collectionJSON struct {
	Name   string `json:"name"`
	UID    string `json:"uid"`
	MaxTTL int64  `json:"maxTTL"`
	// DefaultTTL is absent when off (Cosmos DB's null).
	DefaultTTL  int64 `json:"defaultTTL,omitempty"`
	IdleTTL     int64 `json:"idleTTL,omitempty"`
	MaxLifetime int64 `json:"maxLifetime,omitempty"`
	// Reevaluated is how many documents a settings change re-wrote.
	Reevaluated *int `json:"reevaluated,omitempty"`
}

func collectionJSONOf(c engine.CollectionInfo) collectionJSON {
	return collectionJSON{Name: c.Name, UID: strconv.FormatUint(uint64(c.ID), 16), MaxTTL: c.MaxTTL,
		DefaultTTL: c.DefaultTTL, IdleTTL: c.IdleTTL, MaxLifetime: c.MaxLifetime}
}

// ttlSettingParams are the collection TTL settings a create or a PATCH takes.
var ttlSettingParams = []string{"defaultTTL", "idleTTL", "maxLifetime"}

// ttlSettings reads the collection TTL settings present in vals into cs:
// defaultTTL "null" (or empty) is off, -1 or n > 0 on; idleTTL and
// maxLifetime "null", empty or 0 are off, n > 0 seconds.
func ttlSettings(vals url.Values, cs *engine.CollectionSettings) (map[string]any, error) {
	audited := map[string]any{}
	for _, name := range ttlSettingParams {
		if !vals.Has(name) {
			continue
		}
		raw := strings.TrimSpace(vals.Get(name))
		var v int64
		if raw != "" && raw != "null" {
			n, err := strconv.ParseInt(raw, 10, 64)
			if err != nil || (name == "defaultTTL" && n == 0) {
				if name == "defaultTTL" {
					return nil, errBadRequest(fmt.Sprintf("defaultTTL must be null (off), -1 or a positive integer, got %q", raw))
				}
				return nil, errBadRequest(fmt.Sprintf("%s must be null, 0 (off) or a positive integer, got %q", name, raw))
			}
			v = n
		}
		switch name {
		case "defaultTTL":
			cs.DefaultTTL = v
		case "idleTTL":
			cs.IdleTTL = v
		case "maxLifetime":
			cs.MaxLifetime = v
		}
		audited[name] = v
	}
	return audited, nil
}

func (s *server) listScopes(w http.ResponseWriter, r *http.Request) error {
	b, err := s.bucketOf(r)
	if err != nil {
		return err
	}
	out := scopesJSON{UID: strconv.FormatUint(b.ManifestUID(), 16), Scopes: []scopeJSON{}}
	scopes := b.Scopes()
	uids := clusterconfig.ScopeUIDs(scopes)
	for i, sc := range scopes {
		sj := scopeJSON{Name: sc.Name, UID: strconv.FormatUint(uint64(uids[i]), 16), Collections: []collectionJSON{}}
		for _, c := range sc.Collections {
			sj.Collections = append(sj.Collections, collectionJSONOf(c))
		}
		out.Scopes = append(out.Scopes, sj)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *server) createScope(w http.ResponseWriter, r *http.Request) error {
	b, vals, err := s.bucketForm(r)
	if err != nil {
		return err
	}
	in, err := s.intend(r, audit.Event{Action: audit.ActionScopeCreate, Bucket: b.Name(), Target: vals.Get("name")})
	if err != nil {
		return err
	}
	if err := s.colls.CreateScope(r.Context(), b, vals.Get("name")); err != nil {
		s.settle(r, in, err)
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"name": vals.Get("name")})
	return nil
}

// collectionPath reads the {bucket}, {scope} and {collection} of a
// collection's path.
func (s *server) collectionPath(r *http.Request) (b *engine.Bucket, scope, coll string, err error) {
	if b, err = s.bucketOf(r); err != nil {
		return nil, "", "", err
	}
	if scope, err = pathVar(r, "scope"); err != nil {
		return nil, "", "", err
	}
	if coll, err = pathVar(r, "collection"); err != nil {
		return nil, "", "", err
	}
	return b, scope, coll, nil
}

// dropScope handles DELETE .../scopes/{scope}: the scope, its collections
// and their documents go.
func (s *server) dropScope(w http.ResponseWriter, r *http.Request) error {
	return s.drop(w, r, audit.ActionScopeDrop, func(b *engine.Bucket, scope, _ string) error {
		return s.colls.DropScope(r.Context(), b, scope)
	})
}

// dropCollection handles DELETE .../scopes/{scope}/collections/{collection}:
// the collection and its documents go.
func (s *server) dropCollection(w http.ResponseWriter, r *http.Request) error {
	return s.drop(w, r, audit.ActionCollectionDrop, func(b *engine.Bucket, scope, coll string) error {
		return s.colls.DropCollection(r.Context(), b, scope, coll)
	})
}

// drop audits and does a scope or collection drop named by the path
// ({collection} is absent for a scope).
func (s *server) drop(w http.ResponseWriter, r *http.Request, action string, do func(b *engine.Bucket, scope, coll string) error) error {
	b, err := s.bucketOf(r)
	if err != nil {
		return err
	}
	scope, err := pathVar(r, "scope")
	if err != nil {
		return err
	}
	target, coll := scope, ""
	if _, ok := mux.Vars(r)["collection"]; ok {
		if coll, err = pathVar(r, "collection"); err != nil {
			return err
		}
		target = scope + "." + coll
	}
	in, err := s.intend(r, audit.Event{Action: action, Bucket: b.Name(), Target: target})
	if err != nil {
		return err
	}
	if err := do(b, scope, coll); err != nil {
		s.settle(r, in, err)
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"dropped": target})
	return nil
}

func (s *server) createCollection(w http.ResponseWriter, r *http.Request) error {
	b, err := s.bucketOf(r)
	if err != nil {
		return err
	}
	scope, err := pathVar(r, "scope")
	if err != nil {
		return err
	}
	vals, err := formParams(r)
	if err != nil {
		return err
	}
	maxTTL, _, err := intParam(vals, "maxTTL")
	if err != nil {
		return err
	}
	cs := engine.CollectionSettings{MaxTTL: maxTTL}
	after, err := ttlSettings(vals, &cs)
	if err != nil {
		return err
	}
	after["maxTTL"] = maxTTL
	in, err := s.intend(r, audit.Event{Action: audit.ActionCollectionCreate, Bucket: b.Name(), Target: scope + "." + vals.Get("name"),
		After: after})
	if err != nil {
		return err
	}
	ci, err := s.colls.CreateCollection(r.Context(), b, scope, vals.Get("name"), cs)
	if err != nil {
		s.settle(r, in, err)
		return err
	}
	writeJSON(w, http.StatusOK, collectionJSONOf(ci))
	return nil
}

// actionCollectionSettings is the audit action of a collection settings
// change.
const actionCollectionSettings = "collection.settings"

// updateCollection handles PATCH (or POST) .../scopes/{scope}/collections/{collection}:
// the form fields defaultTTL, idleTTL and maxLifetime that are present
// change; the rest stay. maxTTL cannot change. Every call then re-evaluates
// the collection's documents (engine.Bucket.UpdateCollection; on a cluster,
// every node the partitions it leads) before it answers, even if the
// request goes away meanwhile; the answer says how many it re-wrote (on a
// cluster, this node).
func (s *server) updateCollection(w http.ResponseWriter, r *http.Request) error {
	b, scope, coll, err := s.collectionPath(r)
	if err != nil {
		return err
	}
	vals, err := formParams(r)
	if err != nil {
		return err
	}
	for name := range vals {
		if name == "maxTTL" {
			return errBadRequest("maxTTL cannot change; settable: defaultTTL, idleTTL, maxLifetime")
		}
		if !slices.Contains(ttlSettingParams, name) {
			return errBadRequest(fmt.Sprintf("unknown collection setting %q; settable: defaultTTL, idleTTL, maxLifetime", name))
		}
	}
	var probe engine.CollectionSettings
	after, err := ttlSettings(vals, &probe)
	if err != nil {
		return err
	}
	in, err := s.intend(r, audit.Event{Action: actionCollectionSettings, Bucket: b.Name(), Target: scope + "." + coll, After: after})
	if err != nil {
		return err
	}
	ci, n, err := s.colls.UpdateCollection(context.WithoutCancel(r.Context()), b, scope, coll, func(cs *engine.CollectionSettings) error {
		_, err := ttlSettings(vals, cs)
		return err
	})
	if err != nil {
		s.settle(r, in, err)
		return err
	}
	out := collectionJSONOf(ci)
	out.Reevaluated = &n
	writeJSON(w, http.StatusOK, out)
	return nil
}

// flushBucket handles POST /pools/default/buckets/{bucket}/controller/doFlush:
// every document of the bucket is deleted (the engine's Bucket.Flush; views
// and search indexes drop them too); its collections, design documents and
// search indexes are kept. A bucket without flushEnabled answers Couchbase's
// 400 {"_": "Flush is disabled for the bucket"} (gocb's
// ErrBucketNotFlushable) and loses nothing. Audited. On a cluster
// (Options.Flusher) it answers 200 once every partition is flushed, on
// every node; a flush not finished in time answers 503 with Couchbase's
// failed-flush text (flushPendingBody) and goes on in the background.
func (s *server) flushBucket(w http.ResponseWriter, r *http.Request) error {
	name, err := pathVar(r, "bucket")
	if err != nil {
		return err
	}
	b, err := s.eng.Bucket(name)
	if err != nil {
		return err
	}
	if !b.Settings().FlushEnabled {
		writeJSON(w, http.StatusBadRequest, map[string]string{"_": "Flush is disabled for the bucket"})
		return nil
	}
	in, err := s.intend(r, audit.Event{Action: audit.ActionBucketFlush, Bucket: name})
	if err != nil {
		return err
	}
	n, err := s.flush.FlushBucket(r.Context(), b)
	if err != nil {
		s.settle(r, in, err)
		if errors.Is(err, engine.ErrFlushPending) {
			s.log.Warn("bucket flush not finished in time; it goes on in the background", "bucket", name, "err", err)
			writeJSON(w, http.StatusServiceUnavailable, flushPendingBody(err))
			return nil
		}
		return err
	}
	s.log.Info("bucket flushed", "bucket", name, "deleted", n, "by", principalOf(r).Name, "remote", r.RemoteAddr)
	w.WriteHeader(http.StatusOK)
	return nil
}

// flushPendingBody is the answer to a flush that did not finish in time:
// Couchbase's text for a flush that failed (ns_server answers it 500 when
// its flush does not complete; test suites match it to retry), with a
// 503 here since the flush is under way and a retry is right, and
// Mayfly's error code and reason beside it.
func flushPendingBody(err error) map[string]string {
	return map[string]string{
		"_":      "Flush failed with unexpected error. Check server logs for details.",
		"error":  "temporary_failure",
		"reason": reason.Of(err),
	}
}

// settingErr is a refused bucket parameter: a 400 whose answer carries
// Couchbase's "errors" object naming the field, as a setting the engine
// refuses does (bucketSettingError).
func settingErr(field, format string, args ...any) error {
	return &bucketSettingError{fmt.Errorf("%w: %s: %s", engine.ErrInvalidSetting, field, fmt.Sprintf(format, args...))}
}
