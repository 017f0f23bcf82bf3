// Package httpapi is Mayfly's HTTP front door: documents, buckets, scopes and
// collections in Couchbase's REST shapes, design documents and view queries,
// the expiry pager's admin endpoints, statistics and metrics. Every error is a
// JSON object {"error": ..., "reason": ...} (the search API's
// {"status": "fail", "error": ...}); handlers return their errors and
// errors.go alone decides statuses and bodies.
package httpapi

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mayflydb/mayfly/audit"
	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/internal/clusterconfig"
	"github.com/mayflydb/mayfly/pager"
	"github.com/mayflydb/mayfly/views"
)

// Options configure the HTTP API. A nil *Options means defaults.
type Options struct {
	// Logger receives request errors and refusals. The default value
	// discards them.
	Logger *slog.Logger
	// Views serves design documents and view queries; nil disables them.
	Views *views.Service
	// Pager runs the expiry pagers; nil disables its endpoints.
	Pager *pager.Manager
	// Audit records every administrative action before it is done (see
	// audit.go); an action whose record fails is refused. nil records
	// nothing.
	Audit *audit.Log
	// Auth holds the users every request authenticates as (HTTP Basic). nil
	// refuses every request with 401.
	Auth *auth.Store
	// AllowedHosts are Host header values answered besides the listening
	// address and localhost, 127.0.0.1, [::1] with its port: "name" (any
	// port) or "name:port".
	AllowedHosts []string
	// CORSOrigins are the browser origins (scheme://host[:port]) allowed to
	// call the API cross-origin. None by default.
	CORSOrigins []string
	// MetricsToken, when set, is also accepted on /metrics as
	// "Authorization: Bearer <token>".
	MetricsToken string
	// Search serves the full-text search REST API (/api/index/...); nil
	// leaves it out.
	Search SearchService
	// MaxRequests caps requests served at once; more are answered 503. A
	// request takes its slot once authenticated (see admission.go). 0 means
	// DefaultMaxRequests.
	MaxRequests int
	// ReservedRequests is how many of the MaxRequests slots requests whose
	// body is still arriving (chunked, or over 64 KiB) cannot take, kept for
	// the others. 0 means MaxRequests/4.
	ReservedRequests int
	// MaxStreams caps the long-lived streams (continuous, longpoll and
	// eventsource change feeds, configuration streams) open at once; one
	// more is answered 503. A stream holds a request slot only until it is
	// established. 0 means MaxRequests.
	MaxStreams int
	// MaxStreamsPerUser caps the streams one user has open at once; one
	// more is answered 429. 0 means DefaultMaxStreamsPerUser.
	MaxStreamsPerUser int
	// MinBodyRate is the slowest a request body may arrive, in bytes a
	// second on average, once BodyGrace has passed; a slower one is cut
	// with a 408. 0 means DefaultMinBodyRate.
	MinBodyRate int
	// BodyGrace is the time a body has before MinBodyRate applies. 0 means
	// DefaultBodyGrace.
	BodyGrace time.Duration
	// FailureLogInterval is the interval, in seconds, over which refusals
	// before authentication (failed logins above all) from one source
	// address and user name are counted into one log and audit line after
	// the first. 0 means DefaultFailureLogInterval.
	FailureLogInterval int64
	// Console serves the web console (package console): GET and HEAD of /,
	// /ui and /ui/NAME go to it after the Host check, without
	// authentication (its files hold no data; its own API calls
	// authenticate). nil leaves it out.
	Console http.Handler
	// PagerRuns records the expiry pager's runs for GET
	// /{bucket}/_expiry/runs; pass its RunEnd in the pager's Events. nil
	// shows the last run only.
	PagerRuns *PagerRuns
	// StatsHistory keeps recent samples of each bucket's statistics for
	// GET /pools/default/buckets/{bucket}/stats/history (the web console's
	// charts); Run it beside the server. nil answers no samples.
	StatsHistory *StatsHistory
	// ClusterPorts are the ports the cluster configuration (/pools/...)
	// lists: the KV port, and the HTTP API's own for management, views and
	// search. Zero ports are left out.
	ClusterPorts clusterconfig.Ports
	// Cluster reads what GET /pools/default shows of the cluster beyond
	// this node (its other nodes, whether it is balanced, and the cluster's
	// state as `mayfly cluster status` shows it, for the console), for a
	// caller who sees the buckets sees reports true for (Principal.SeesBucket):
	// the state names no other bucket. nil (a single node) lists this node
	// alone.
	Cluster func(ctx context.Context, sees func(bucket string) bool) (*ClusterView, error)
	// DesignDocs stores and deletes design documents for PUT and DELETE
	// /{bucket}/_design/{ddoc}; nil means Views itself. A cluster node
	// passes one that writes the definition to the cluster's state, from
	// which every node applies it to its own Views.
	DesignDocs DesignDocStore
	// Users creates, changes and deletes users (PUT and DELETE
	// /settings/rbac/users/local/{name}); nil means Auth itself. A cluster
	// node passes one that writes the user to the cluster's state, from
	// which every node applies it to its own Auth.
	Users UserStore
	// Collections creates, changes and drops scopes and collections; nil
	// means the buckets' own methods. A cluster node passes one that
	// changes the manifest in the cluster's state, which every node
	// applies.
	Collections CollectionStore
	// Flusher flushes a bucket for POST .../controller/doFlush; nil means
	// the bucket's own Flush. A cluster node passes one that records the
	// flush in the cluster's state, which every node takes up, each
	// partition flushed by its leader.
	Flusher BucketFlusher
	// ViewCoverage, on a cluster node, returns which node answers for
	// which partitions of a bucket's views (nil, nil while the bucket has
	// none): a view query then asks each coverer for its share and merges
	// them (see "Views across nodes" in docs/ARCHITECTURE.md). nil (a
	// single node) answers every view query from this node's index alone.
	// atLeast is the coverage revision another node asked this one for
	// its share under (0 for a client's query): a node that keeps the
	// coverage from a watch may wait a moment for its copy to reach it
	// before answering.
	ViewCoverage func(ctx context.Context, bucket string, atLeast int64) (*ViewCoverage, error)
	// CopyCoverage, on a cluster node, is ViewCoverage for what reads the
	// node's copies of the documents rather than its view indexes:
	// listings (_all_docs, the console's document listing) and the item
	// count. Any node holding a copy of a partition may answer for it, so
	// a node down is replaced there as soon as its lease expires, not once
	// another node's view indexes caught up. nil: ViewCoverage.
	CopyCoverage func(ctx context.Context, bucket string, atLeast int64) (*ViewCoverage, error)
	// ShareClient sends the requests for other nodes' shares of a view
	// query; nil is a client of its own.
	ShareClient *http.Client
	// Route, on a cluster node, says where a request for one document
	// (bucket, key) is answered: a Route without Addr here, else it is
	// forwarded to the leader of the key's partition (forward.go). An
	// error (wrapping engine.ErrNotMyVBucket while the partition has no
	// leader) answers the request. A read answered here takes the
	// Route's Barrier first. nil answers every request here.
	Route func(ctx context.Context, bucket, key string) (Route, error)
	// BulkLineTimeout, on a cluster node, bounds the wait for each answer
	// line of a batch of _bulk lines forwarded to another node, once its
	// answer began: a node that stops answering mid-batch (its lease
	// holding) has the batch broken off, the lines it did not answer
	// answering temporary_failure, their outcome unknown. 0 means 45 s,
	// the bound on a forwarded request's answer to begin.
	BulkLineTimeout time.Duration
	// Topology, on a cluster node, lays a bucket's configuration
	// (/pools/default/b/{bucket} and the streams) out over the cluster:
	// every node, and each partition's leader first (see
	// clusterconfig.Topology). Asked for the bucket "" it gives the
	// cluster's nodes (Servers and Rev), which
	// /pools/default/nodeServices lists. nil serves this node alone.
	Topology func(ctx context.Context, bucket string) (*clusterconfig.Topology, error)
}

// CollectionStore creates, changes and drops a bucket's scopes and
// collections, with the engine's errors.
type CollectionStore interface {
	CreateScope(ctx context.Context, b *engine.Bucket, name string) error
	CreateCollection(ctx context.Context, b *engine.Bucket, scope, name string, cs engine.CollectionSettings) (engine.CollectionInfo, error)
	DropScope(ctx context.Context, b *engine.Bucket, name string) error
	DropCollection(ctx context.Context, b *engine.Bucket, scope, name string) error
	// UpdateCollection changes a collection's TTL settings (fn edits a
	// copy) and re-evaluates its documents, returning how many this node
	// re-wrote (engine.Bucket.UpdateCollection).
	UpdateCollection(ctx context.Context, b *engine.Bucket, scope, name string, fn func(*engine.CollectionSettings) error) (engine.CollectionInfo, int, error)
}

// UserStore changes the users, with auth.Store's errors, and says how far
// this node's users have come on a cluster, so that a request forwarded to
// another node is authenticated there once that node's users have come as
// far (UsersVersionHeader).
type UserStore interface {
	// PutUser creates or replaces a user. It refuses roles on buckets that
	// do not exist (auth.RolesOnMissingBuckets, auth.ErrInvalidRole): a
	// single node's own store (Options.Users nil) is checked against the
	// engine's buckets by the server, any other UserStore checks them
	// itself (a cluster's, against the cluster's bucket definitions).
	PutUser(ctx context.Context, id, name, password string, roles []auth.Role) error
	DeleteUser(ctx context.Context, id string) error
	// Version is how far this node's users have come: the cluster's
	// revision of the last change of its users this node applied; 0 on a
	// single node.
	Version() int64
	// WaitVersion waits until this node's users have come to version v.
	WaitVersion(ctx context.Context, v int64) error
}

// localUsers is the UserStore of a single node: the store itself.
type localUsers struct{ store *auth.Store }

func (l localUsers) PutUser(_ context.Context, id, name, password string, roles []auth.Role) error {
	return l.store.PutUser(id, name, password, roles)
}

func (l localUsers) DeleteUser(_ context.Context, id string) error { return l.store.DeleteUser(id) }

func (localUsers) Version() int64 { return 0 }

func (localUsers) WaitVersion(context.Context, int64) error { return nil }

// localCollections is the CollectionStore of a single node: the bucket's
// own methods.
type localCollections struct{}

func (localCollections) CreateScope(ctx context.Context, b *engine.Bucket, name string) error {
	return b.CreateScope(ctx, name)
}

func (localCollections) CreateCollection(ctx context.Context, b *engine.Bucket, scope, name string, cs engine.CollectionSettings) (engine.CollectionInfo, error) {
	return b.CreateCollectionWith(ctx, scope, name, cs)
}

func (localCollections) DropScope(ctx context.Context, b *engine.Bucket, name string) error {
	return b.DropScope(ctx, name)
}

func (localCollections) DropCollection(ctx context.Context, b *engine.Bucket, scope, name string) error {
	return b.DropCollection(ctx, scope, name)
}

func (localCollections) UpdateCollection(ctx context.Context, b *engine.Bucket, scope, name string, fn func(*engine.CollectionSettings) error) (engine.CollectionInfo, int, error) {
	return b.UpdateCollection(ctx, scope, name, fn)
}

// BucketFlusher deletes every document of a bucket, with the engine's
// errors (engine.ErrFlushPending: a flush that goes on in the background),
// and returns how many this node deleted.
type BucketFlusher interface {
	FlushBucket(ctx context.Context, b *engine.Bucket) (int, error)
}

// localFlusher is the BucketFlusher of a single node: the bucket's Flush.
type localFlusher struct{}

func (localFlusher) FlushBucket(ctx context.Context, b *engine.Bucket) (int, error) {
	return b.Flush(ctx)
}

// DesignDocStore stores and deletes design documents (*views.Service is
// one), with views.Service's errors.
type DesignDocStore interface {
	PutDesignDoc(ctx context.Context, bucket, name string, body []byte) (*views.DesignDoc, error)
	DeleteDesignDoc(ctx context.Context, bucket, name string) error
}

var _ DesignDocStore = (*views.Service)(nil)

// server holds what the handlers share.
type server struct {
	eng   *engine.Engine
	views *views.Service
	ddocs DesignDocStore  // Options.DesignDocs, or views
	colls CollectionStore // Options.Collections, or the buckets'
	flush BucketFlusher   // Options.Flusher, or the buckets'
	users UserStore       // Options.Users, or Auth's (nil without Auth)
	// usersWaits are the requests waiting for this node's users
	// (awaitUsers).
	usersWaits usersWaits
	pager      *pager.Manager
	search     SearchService
	auditLog   *audit.Log
	log        *slog.Logger
	sec        *security
	fails      *failureLog
	console    http.Handler
	runs       *PagerRuns
	history    *StatsHistory
	ports      clusterconfig.Ports
	cluster    func(ctx context.Context, sees func(bucket string) bool) (*ClusterView, error)
	coverage   coverageFunc // the views'; nil: a single node
	copies     coverageFunc // the listings' and item count's (Options.CopyCoverage)
	shares     *http.Client
	streams    chan struct{} // one per open configuration stream
	route      func(ctx context.Context, bucket, key string) (Route, error)
	fwd        *http.Transport // forwarded requests' (nil without route)
	bulkStall  time.Duration   // Options.BulkLineTimeout, or forwardTimeout
	topology   func(ctx context.Context, bucket string) (*clusterconfig.Topology, error)
}

// New returns the HTTP API over eng as one http.Handler. Every request
// authenticates; each route needs the permission the table in README.md
// names.
func New(eng *engine.Engine, opts *Options) http.Handler {
	h, _ := newAPI(eng, opts)
	return h
}

// newAPI is New, returning its router too (for the tests).
func newAPI(eng *engine.Engine, opts *Options) (http.Handler, *viewRouter) {
	o := Options{}
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s := &server{eng: eng, views: o.Views, pager: o.Pager, search: o.Search, auditLog: o.Audit, log: o.Logger, sec: newSecurity(&o),
		fails: newFailureLog(o.FailureLogInterval), console: o.Console, runs: o.PagerRuns, history: o.StatsHistory, ports: o.ClusterPorts, cluster: o.Cluster,
		coverage: o.ViewCoverage, copies: o.CopyCoverage, shares: o.ShareClient,
		streams: make(chan struct{}, MaxConfigStreams), usersWaits: usersWaits{slots: make(chan struct{}, maxUsersWaits)}}
	if s.copies == nil {
		s.copies = s.coverage
	}
	s.ddocs, s.colls, s.flush = o.DesignDocs, o.Collections, o.Flusher
	if s.flush == nil {
		s.flush = localFlusher{}
	}
	if s.colls == nil {
		s.colls = localCollections{}
	}
	s.users = o.Users
	if s.users == nil && o.Auth != nil {
		s.users = localUsers{o.Auth}
	}
	if s.ddocs == nil && o.Views != nil {
		s.ddocs = o.Views
	}
	if s.history != nil {
		s.history.bind(s)
	}
	if s.shares == nil {
		s.shares = &http.Client{}
	}
	s.topology = o.Topology
	if o.Route != nil {
		s.route, s.fwd = o.Route, newForwardTransport()
	}
	s.bulkStall = o.BulkLineTimeout
	if s.bulkStall <= 0 {
		s.bulkStall = forwardTimeout
	}
	r := mux.NewRouter()
	r.UseEncodedPath() // keys may hold "/" as %2F
	r.SkipClean(true)  // no redirects: dot segments are refused by guard
	r.NotFoundHandler = apiHandler(func(http.ResponseWriter, *http.Request) error {
		return errNotFound("no such resource")
	})
	r.MethodNotAllowedHandler = apiHandler(func(_ http.ResponseWriter, req *http.Request) error {
		return &httpError{status: http.StatusMethodNotAllowed, code: "method_not_allowed", reason: req.Method + " is not allowed here"}
	})
	const form, noForm = true, false
	cluster := func(a auth.Action) permFunc {
		return func(*http.Request) []auth.Permission { return []auth.Permission{{Action: a}} }
	}

	// The document routes come first: the router tries routes in order,
	// each a regular expression, and single-document reads and writes are
	// the hot path. No route before them matches a path whose second
	// segment is "docs", so the order changes no answer.
	// On a cluster node each is answered by its partition's leader
	// (routed: forward.go).
	r.Handle("/{bucket}/docs/{key:.+}/touch", s.need(on(auth.DataWrite), noForm, s.routed(s.touchDoc))).Methods(http.MethodPost)
	r.Handle("/{bucket}/docs/{key:.+}", s.need(on(auth.DataWrite), noForm, s.routed(s.putDoc))).Methods(http.MethodPut)
	// get-and-touch (?touch=E) changes the expiry: it needs data_writer too,
	// and guard refuses it cross-site (getWrites).
	r.Handle("/{bucket}/docs/{key:.+}", s.need(also(on(auth.DataRead), auth.DataWrite, getWrites), noForm, s.routed(s.getDoc))).Methods(http.MethodGet, http.MethodHead)
	r.Handle("/{bucket}/docs/{key:.+}", s.need(on(auth.DataWrite), noForm, s.routed(s.deleteDoc))).Methods(http.MethodDelete)
	r.Handle("/pools", s.need(cluster(auth.PoolsRead), noForm, s.getPools)).Methods(http.MethodGet)
	r.Handle("/pools/default", s.need(cluster(auth.PoolsRead), noForm, s.getPoolsDefault)).Methods(http.MethodGet)
	r.Handle("/pools/default/nodeServices", s.need(cluster(auth.PoolsRead), noForm, s.getNodeServices)).Methods(http.MethodGet)
	r.Handle("/pools/default/b/{bucket}", s.need(on(auth.SettingsRead), noForm, s.getTerseBucket)).Methods(http.MethodGet)
	// Streams end when their user loses its access (revocable).
	r.Handle("/pools/default/bs/{bucket}", s.need(on(auth.SettingsRead), noForm, s.revocable(on(auth.SettingsRead), s.streamTerseBucket))).Methods(http.MethodGet)
	r.Handle("/pools/default/bucketsStreaming/{bucket}", s.need(on(auth.SettingsRead), noForm, s.revocable(on(auth.SettingsRead), s.streamBucketConfig))).Methods(http.MethodGet)
	pools := r.PathPrefix("/pools/default/buckets").Subrouter()
	pools.Handle("", s.need(cluster(auth.PoolsRead), noForm, s.listBucketConfigs)).Methods(http.MethodGet)
	pools.Handle("", s.need(cluster(auth.BucketsCreate), form, s.createBucket)).Methods(http.MethodPost)
	pools.Handle("/{bucket}", s.need(on(auth.SettingsRead), noForm, s.getBucketConfig)).Methods(http.MethodGet)
	pools.Handle("/{bucket}", s.need(on(auth.SettingsWrite), form, s.updateBucket)).Methods(http.MethodPost)
	pools.Handle("/{bucket}", s.need(on(auth.BucketDelete), noForm, s.deleteBucket)).Methods(http.MethodDelete)
	pools.Handle("/{bucket}/scopes", s.need(on(auth.SettingsRead), noForm, s.listScopes)).Methods(http.MethodGet)
	pools.Handle("/{bucket}/scopes", s.need(on(auth.SettingsWrite), form, s.createScope)).Methods(http.MethodPost)
	pools.Handle("/{bucket}/scopes/{scope}/collections", s.need(on(auth.SettingsWrite), form, s.createCollection)).Methods(http.MethodPost)
	pools.Handle("/{bucket}/scopes/{scope}", s.need(on(auth.SettingsWrite), noForm, s.dropScope)).Methods(http.MethodDelete)
	pools.Handle("/{bucket}/scopes/{scope}/collections/{collection}", s.need(on(auth.SettingsWrite), noForm, s.dropCollection)).Methods(http.MethodDelete)
	pools.Handle("/{bucket}/scopes/{scope}/collections/{collection}", s.need(on(auth.SettingsWrite), form, s.updateCollection)).Methods(http.MethodPatch, http.MethodPost)
	pools.Handle("/{bucket}/scopes/{scope}/collections/{collection}/docs", s.need(on(auth.DataRead), noForm, s.browseDocs)).Methods(http.MethodGet)
	pools.Handle("/{bucket}/ddocs", s.need(on(auth.ViewsRead), noForm, s.listDesignDocs)).Methods(http.MethodGet)
	pools.Handle("/{bucket}/settings/expiryPager", s.need(on(auth.SettingsRead), noForm, s.getExpiryPager)).Methods(http.MethodGet)
	pools.Handle("/{bucket}/settings/expiryPager", s.need(on(auth.SettingsWrite), form, s.setExpiryPager)).Methods(http.MethodPost)
	pools.Handle("/{bucket}/settings/waterMarks", s.need(on(auth.SettingsRead), noForm, s.getWaterMarks)).Methods(http.MethodGet)
	pools.Handle("/{bucket}/settings/waterMarks", s.need(on(auth.SettingsWrite), form, s.setWaterMarks)).Methods(http.MethodPost)
	pools.Handle("/{bucket}/controller/runExpiryPager", s.need(on(auth.SettingsWrite), form, s.runExpiryPager)).Methods(http.MethodPost)
	pools.Handle("/{bucket}/controller/doFlush", s.need(on(auth.SettingsWrite), form, s.flushBucket)).Methods(http.MethodPost)
	pools.Handle("/{bucket}/stats", s.need(on(auth.StatsRead), noForm, s.getStats)).Methods(http.MethodGet)
	pools.Handle("/{bucket}/stats/warmup", s.need(on(auth.StatsRead), noForm, s.getWarmupStats)).Methods(http.MethodGet)
	pools.Handle("/{bucket}/stats/history", s.need(on(auth.StatsRead), noForm, s.getStatsHistory)).Methods(http.MethodGet)

	// Who the caller is and what they may do: any authenticated caller.
	anyone := func(*http.Request) []auth.Permission { return nil }
	r.Handle("/whoami", s.need(anyone, noForm, s.whoami)).Methods(http.MethodGet)
	r.Handle("/pools/default/checkPermissions", s.need(anyone, form, s.checkPermissions)).Methods(http.MethodPost)
	r.Handle("/settings/rbac/users", s.need(cluster(auth.SecurityRead), noForm, s.listUsers)).Methods(http.MethodGet)
	r.Handle("/settings/rbac/users/local", s.need(cluster(auth.SecurityRead), noForm, s.listUsers)).Methods(http.MethodGet)
	r.Handle("/settings/rbac/roles", s.need(cluster(auth.SecurityRead), noForm, s.listRoles)).Methods(http.MethodGet)
	r.Handle("/settings/rbac/users/local/{name}", s.need(cluster(auth.SecurityRead), noForm, s.getUser)).Methods(http.MethodGet)
	r.Handle("/settings/rbac/users/local/{name}", s.need(cluster(auth.SecurityWrite), form, s.putUser)).Methods(http.MethodPut)
	r.Handle("/settings/rbac/users/local/{name}", s.need(cluster(auth.SecurityWrite), noForm, s.deleteUser)).Methods(http.MethodDelete)

	reg := prometheus.NewRegistry()
	hm := newHTTPMetrics()
	reg.MustRegister(newStatsCollector(s), s.sec.refused, hm.requests, hm.duration,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	r.Use(markRoute, s.admit)
	metrics := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	r.Handle("/metrics", s.need(cluster(auth.MetricsRead), noForm, answers(metrics))).Methods(http.MethodGet)

	r.Handle("/{bucket}/_design/{ddoc}", s.need(on(auth.ViewsWrite), noForm, s.putDesignDoc)).Methods(http.MethodPut)
	r.Handle("/{bucket}/_design/{ddoc}", s.need(on(auth.ViewsRead), noForm, s.getDesignDoc)).Methods(http.MethodGet)
	r.Handle("/{bucket}/_design/{ddoc}", s.need(on(auth.ViewsWrite), noForm, s.deleteDesignDoc)).Methods(http.MethodDelete)
	r.Handle("/{bucket}/_design/{ddoc}/_info", s.need(on(auth.ViewsRead), noForm, s.designDocInfo)).Methods(http.MethodGet)
	// include_docs returns documents: it needs data_reader as well.
	// viewRouter routes it ahead of mux, with mux's middleware (admit).
	// A POSTed query's body parameters join its query string before the
	// check (bodyParams), so that include_docs asked in a body needs
	// data_reader as one in the URL does.
	queryView := bodyParams(s.need(also(on(auth.ViewsRead), auth.DataRead, queryTrue("include_docs")), noForm, s.queryView))
	r.Handle(viewRoute, queryView).Methods(http.MethodGet, http.MethodPost)

	r.Handle("/{bucket}/_expiry", s.need(on(auth.StatsRead), noForm, s.expiryForecast)).Methods(http.MethodGet)
	r.Handle("/{bucket}/_expiry/runs", s.need(on(auth.StatsRead), noForm, s.pagerRuns)).Methods(http.MethodGet)
	changesPerms := also(on(auth.ChangesRead), auth.DataRead, queryTrue("include_docs"))
	r.Handle("/{bucket}/_changes", s.need(changesPerms, noForm, s.revocable(changesPerms, s.changesFeed))).Methods(http.MethodGet, http.MethodPost)
	r.Handle("/{bucket}/_bulk", s.need(on(auth.DataWrite), noForm, s.bulk)).Methods(http.MethodPost)
	r.Handle("/{bucket}/_all_docs", bodyParams(s.need(on(auth.DataRead), noForm, s.allDocs))).Methods(http.MethodGet, http.MethodHead, http.MethodPost)
	if o.Search != nil {
		s.searchRoutes(r, o.Search)
	}
	vr := &viewRouter{mux: r, view: s.admit(queryView)}
	return hm.instrument(s.guard(vr)), vr
}
