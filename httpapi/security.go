package httpapi

import (
	"context"
	"crypto/subtle"
	"errors"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/internal/rawquery"
)

// realm is Couchbase's Basic realm, so its tools recognise the challenge.
const realm = `Basic realm="Couchbase Server Admin / REST"`

// Refusal reasons, the label of mayfly_http_refused_total.
const (
	refusedUnauthenticated = "unauthenticated" // 401
	refusedForbidden       = "forbidden"       // 403, authenticated without the right
	refusedHost            = "host"            // 421, a Host the server does not answer for
	refusedOrigin          = "origin"          // 403, a cross-origin state change
	refusedForm            = "form"            // 415, a form body where none is taken
	refusedOverload        = "overload"        // 503, --max-requests reached
	refusedStreams         = "streams"         // 429 or 503, too many streams open for the user or the server
	refusedPath            = "path"            // 400, . or .. segments
	refusedThrottled       = "throttled"       // 429, too many failed logins from the source or for the user
	refusedAuthBusy        = "auth_busy"       // 503, too many password checks waiting
	refusedUsersPending    = "users_pending"   // 503, a cluster node that has not loaded the cluster's users yet
	refusedTooLarge        = "too_large"       // 413, a declared body over the route's limit
	refusedSlowBody        = "slow_body"       // 408, a body arriving slower than --min-body-rate
)

// principalOf returns the authenticated caller of r (nil before
// authentication).
func principalOf(r *http.Request) *auth.Principal {
	if rl, ok := r.Context().Value(routeKey{}).(*routeLabel); ok {
		return rl.principal
	}
	return nil
}

// security is the front door's state: who may come in, from where.
type security struct {
	store        *auth.Store
	allowedHosts []string // "host" (any port) or "host:port", lower case
	corsOrigins  []string // scheme://host[:port], lower case
	metricsToken string
	refused      *prometheus.CounterVec
	adm          *admission
}

func newSecurity(o *Options) *security {
	sec := &security{store: o.Auth, metricsToken: o.MetricsToken}
	for _, h := range o.AllowedHosts {
		sec.allowedHosts = append(sec.allowedHosts, strings.ToLower(strings.TrimSpace(h)))
	}
	for _, c := range o.CORSOrigins {
		sec.corsOrigins = append(sec.corsOrigins, strings.ToLower(strings.TrimRight(strings.TrimSpace(c), "/")))
	}
	sec.adm = newAdmission(o)
	sec.refused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mayfly_http_refused_total",
		Help: "HTTP requests refused at the door, by reason (unauthenticated, forbidden, host, origin, form, overload, path, throttled, auth_busy, users_pending, too_large, slow_body).",
	}, []string{"reason"})
	for _, r := range []string{refusedUnauthenticated, refusedForbidden, refusedHost, refusedOrigin, refusedForm, refusedOverload, refusedPath,
		refusedThrottled, refusedAuthBusy, refusedUsersPending, refusedTooLarge, refusedSlowBody} {
		sec.refused.WithLabelValues(r)
	}
	return sec
}

// guard wraps the router with the checks every request passes, in order:
// dot segments, the Host header, CORS, the Origin of a state change, and
// authentication. Authorization is per route (need). The web console's
// files (Options.Console) are answered after the Host check. None of this
// holds one of the --max-requests slots: a request takes one once it is
// authenticated and routed (see admission.go), so callers whose password is
// still being checked, or is wrong, never keep logged-in ones out.
func (s *server) guard(next http.Handler) http.Handler {
	sec := s.sec
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Every answer names its type, and a browser must not guess
		// another: a binary document (application/octet-stream) or a
		// text one whose bytes look like HTML is never rendered as a page
		// of this origin, where the console and its credentials live.
		// Refusals too: set before any check.
		w.Header().Set("X-Content-Type-Options", "nosniff")
		s.flushFailures(r)
		if hasDotSegment(r.URL.Path) || hasDotSegment(r.URL.EscapedPath()) {
			s.refuse(w, r, refusedPath, &httpError{http.StatusBadRequest, "bad_request", "the path holds a . or .. segment"})
			return
		}
		if !sec.hostAllowed(r) {
			s.refuse(w, r, refusedHost, &httpError{http.StatusMisdirectedRequest, "misdirected_request", "this server does not answer for host " + strconvQuote(r.Host) + " (see mayfly serve --allowed-hosts)"})
			return
		}
		if r.URL.Path == "/favicon.ico" && safeMethod(r.Method) {
			// Browsers ask for it on every page they open here: no
			// credentials, so it is answered without authentication or a
			// log line (the console's page names its own icon).
			w.Header().Set("Cache-Control", "max-age=86400")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if s.console != nil && safeMethod(r.Method) && consolePath(r.URL.Path) {
			s.console.ServeHTTP(w, r) // static files: its API calls authenticate
			return
		}
		origin := r.Header.Get("Origin")
		if origin != "" && sec.corsAllowed(origin) {
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Allow-Credentials", "true")
			h.Add("Vary", "Origin")
			if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
				h.Set("Access-Control-Allow-Methods", "GET, POST, PUT, DELETE")
				h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type")
				h.Set("Access-Control-Max-Age", "600")
				w.WriteHeader(http.StatusNoContent)
				return
			}
		}
		// A GET or HEAD that writes (getWrites) is refused cross-site as
		// a POST is: an <img> on any page would send it with the
		// browser's credentials. sameOrigin first: it holds for most
		// requests, and getWrites reads the query.
		if !sec.sameOrigin(r) && (!safeMethod(r.Method) || getWrites(r)) {
			s.refuse(w, r, refusedOrigin, &httpError{http.StatusForbidden, "forbidden", "cross-origin request refused (Origin, Referer or Sec-Fetch-Site names another site; see mayfly serve --cors-origin)"})
			return
		}
		p, err := s.authenticate(r)
		if p == nil {
			s.authRefused(w, r, err)
			return
		}
		rl, ok := r.Context().Value(routeKey{}).(*routeLabel)
		if !ok { // not under instrument: a value of its own
			r, rl = newRouteLabel(r)
		}
		rl.principal = p // instrument's value: no copy of the request
		next.ServeHTTP(w, r)
	})
}

// authenticate returns the caller, or nil and why not (nil when no
// credentials came). The metrics token, when set, is taken as a bearer token
// on /metrics only.
func (s *server) authenticate(r *http.Request) (*auth.Principal, error) {
	authz := r.Header.Get("Authorization")
	if tok, ok := strings.CutPrefix(authz, "Bearer "); ok {
		if s.sec.metricsToken != "" && r.URL.Path == "/metrics" &&
			subtle.ConstantTimeCompare([]byte(tok), []byte(s.sec.metricsToken)) == 1 {
			return &auth.Principal{Name: "(metrics token)", Roles: []auth.Role{{Name: auth.RoleROAdmin}}}, nil
		}
		return nil, errBadBearer
	}
	user, pass, ok := r.BasicAuth()
	if !ok || s.sec.store == nil {
		return nil, nil
	}
	s.awaitUsers(r) // another node's request: its users known here first
	return s.sec.store.Authenticate(r.Context(), user, pass, sourceOf(r))
}

// errBadBearer is a bearer token that is not the metrics token.
var errBadBearer = errors.New("bad bearer token")

// authRefused answers a request that did not authenticate: 401, or 429 for
// a source or user name backing off after failed logins, or 503 when too
// many password checks are waiting or a cluster node has not loaded the
// cluster's users yet. It is logged and audited through the
// failure log (loginfail.go).
func (s *server) authRefused(w http.ResponseWriter, r *http.Request, err error) {
	user, _, _ := r.BasicAuth()
	reason, he := refusedUnauthenticated, &httpError{http.StatusUnauthorized, "unauthorized", "authentication required: HTTP Basic with a valid user name and password"}
	var te *auth.ThrottledError
	switch {
	case errors.As(err, &te):
		reason = refusedThrottled
		he = &httpError{http.StatusTooManyRequests, "too_many_requests", "too many failed logins from this address or for this user name; the password was not checked: retry in " + strconv.Itoa(retrySeconds(te.RetryAfter)) + "s"}
		w.Header().Set("Retry-After", strconv.Itoa(retrySeconds(te.RetryAfter)))
	case errors.Is(err, auth.ErrBusy):
		reason = refusedAuthBusy
		he = &httpError{http.StatusServiceUnavailable, "too_many_requests", "too many password checks are waiting; retry shortly"}
		w.Header().Set("Retry-After", "1")
	case errors.Is(err, auth.ErrUsersPending):
		reason = refusedUsersPending
		he = &httpError{http.StatusServiceUnavailable, "temporary_failure", "temporary failure: this node has not loaded the cluster's users since it started (the cluster's state unreachable?); the password was not checked: retry shortly"}
		w.Header().Set("Retry-After", "1")
	case r.Context().Err() != nil:
		return // the caller left
	}
	s.sec.refused.WithLabelValues(reason).Inc()
	logged := err
	if errors.Is(err, auth.ErrBadCredentials) {
		logged = nil // the reason says it
	}
	s.refusedAtDoor(r, reason, user, logged)
	if reason == refusedUnauthenticated {
		w.Header().Set("WWW-Authenticate", realm)
	}
	writeError(w, he)
}

// retrySeconds rounds a wait up to whole seconds, at least 1.
func retrySeconds(d time.Duration) int {
	return max(1, int((d+time.Second-1)/time.Second))
}

// refuse counts, logs and answers a refusal.
func (s *server) refuse(w http.ResponseWriter, r *http.Request, reason string, err *httpError) {
	s.sec.refused.WithLabelValues(reason).Inc()
	if principalOf(r) == nil {
		s.refusedAtDoor(r, reason, "", nil) // aggregated: costs bounded disk
	} else {
		s.log.Warn("request refused", "reason", reason, "user", requestUser(r), "remote", r.RemoteAddr, "method", r.Method,
			"path", capString(r.URL.Path, maxLoggedPath), "host", capString(r.Host, maxLoggedPath), "origin", capString(r.Header.Get("Origin"), maxLoggedPath))
	}
	if reason == refusedOverload {
		w.Header().Set("Retry-After", "1")
	}
	writeError(w, err)
}

// permFunc names the permissions a request needs.
type permFunc func(r *http.Request) []auth.Permission

// on is the permission of action on the request's {bucket}.
func on(actions ...auth.Action) permFunc {
	return func(r *http.Request) []auth.Permission {
		b, err := pathVar(r, "bucket")
		if err != nil {
			b = routeVar(r, "bucket")
		}
		ps := make([]auth.Permission, len(actions))
		for i, a := range actions {
			ps[i] = auth.Permission{Action: a, Bucket: b}
		}
		return ps
	}
}

// also adds action to what f needs when cond holds for the request.
func also(f permFunc, action auth.Action, cond func(r *http.Request) bool) permFunc {
	return func(r *http.Request) []auth.Permission {
		ps := f(r)
		if cond(r) {
			ps = append(ps, on(action)(r)...)
		}
		return ps
	}
}

// getWrites reports whether r, a GET or HEAD, changes what it reads: a
// document's get-and-touch (GET /{bucket}/docs/{key}?touch=E) sets its
// expiry. Such a request needs data_writer too (its route), and guard
// refuses it cross-site as it refuses a POST. A read that slides a
// document's expiry (idleTTL) is a read, not one of these.
func getWrites(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	_, ok := queryParam(r.URL.RawQuery, "touch")
	return ok
}

// queryTrue holds unless the parameter is absent or "false" in any case: any
// other value the parser might take as true (TRUE, True) needs the permission.
func queryTrue(name string) func(r *http.Request) bool {
	return func(r *http.Request) bool {
		v, ok := queryParam(r.URL.RawQuery, name)
		return ok && !strings.EqualFold(v, "false")
	}
}

// queryParam returns the first value of parameter name in the raw query
// and whether it is there, exactly as url.ParseQuery's Values answer Get
// and Has, without building them (rawquery): the permission checks ask it
// for every request of a view or a document.
func queryParam(raw, name string) (string, bool) {
	return rawquery.Parse(raw).Lookup(name)
}

// need wraps a handler with its authorization: 403 in Couchbase's shape
// unless the caller holds every permission. Unless form is set, a POST with
// a body a browser form could send (form-encoded, multipart, text/plain) is
// refused: only Couchbase's settings-style endpoints take forms.
func (s *server) need(perms permFunc, form bool, h apiHandler) http.Handler {
	return &guarded{form: form, serve: func(w http.ResponseWriter, r *http.Request) {
		p := principalOf(r)
		var missing []string
		for _, perm := range perms(r) {
			if !p.Allows(perm) {
				missing = append(missing, perm.String())
			}
		}
		if len(missing) > 0 {
			s.sec.refused.WithLabelValues(refusedForbidden).Inc()
			name := ""
			if p != nil {
				name = p.Name
			}
			s.log.Warn("request forbidden", "user", name, "needs", strings.Join(missing, " "), "remote", r.RemoteAddr, "method", r.Method, "path", capString(r.URL.Path, maxLoggedPath))
			writeJSON(w, http.StatusForbidden, map[string]any{
				"error":       "forbidden",
				"reason":      "user " + strconvQuote(name) + " lacks " + strings.Join(missing, ", "),
				"message":     "Forbidden. User needs the following permissions",
				"permissions": missing,
			})
			return
		}
		if !form && r.Method == http.MethodPost && r.ContentLength != 0 && formContentType(r.Header.Get("Content-Type")) {
			s.refuse(w, r, refusedForm, &httpError{http.StatusUnsupportedMediaType, "unsupported_media_type", "this endpoint takes no form body; send Content-Type: application/json"})
			return
		}
		h.ServeHTTP(w, r)
	}}
}

// guarded is a route's handler behind its authorization (see need). It
// says whether the route takes form bodies, for the body limit admission
// applies (see bodyLimit).
type guarded struct {
	form  bool
	serve http.HandlerFunc
}

func (g *guarded) ServeHTTP(w http.ResponseWriter, r *http.Request) { g.serve(w, r) }

// takesForms reports whether h, a route's handler, takes form bodies
// (Couchbase's settings-style endpoints).
func takesForms(h http.Handler) bool {
	g, ok := h.(*guarded)
	return ok && g.form
}

// formContentType reports the content types an HTML form (or a CORS "simple"
// request) can send. An absent type counts: browsers send text/plain then.
func formContentType(ct string) bool {
	if ct == "" {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return true
	}
	switch mt {
	case "application/x-www-form-urlencoded", "multipart/form-data", "text/plain":
		return true
	}
	return false
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// hasDotSegment reports a "." or ".." path segment (which gorilla/mux would
// clean and redirect, and which is never a valid path here).
func hasDotSegment(p string) bool {
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "." || seg == ".." {
			return true
		}
		if len(seg) <= 6 {
			if u, err := url.PathUnescape(seg); err == nil && (u == "." || u == "..") {
				return true
			}
		}
	}
	return false
}

// consolePath reports the paths the web console answers: /, /ui, /ui/ and
// /ui/NAME, one segment not starting with "_". A bucket named "ui" keeps its
// API: /ui/docs/KEY, /ui/_design/..., /ui/_bulk are not the console's.
func consolePath(p string) bool {
	if p == "/" || p == "/ui" {
		return true
	}
	name, ok := strings.CutPrefix(p, "/ui/")
	return ok && !strings.Contains(name, "/") && !strings.HasPrefix(name, "_")
}

// hostAllowed reports whether r's Host is one this server answers for: the
// address the connection came to, localhost, 127.0.0.1 or [::1] with that
// port, or one of --allowed-hosts. This defeats DNS rebinding: a page on
// evil.example whose name now points at 127.0.0.1 still sends Host:
// evil.example.
func (sec *security) hostAllowed(r *http.Request) bool {
	host := strings.ToLower(r.Host)
	if host == "" {
		return false
	}
	for _, a := range sec.allowedHosts {
		if a == host {
			return true
		}
		if h, _, err := net.SplitHostPort(host); err == nil && a == h {
			return true
		}
		if a == strings.Trim(host, "[]") {
			return true
		}
	}
	local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if local == nil {
		return false
	}
	lh, lport, err := net.SplitHostPort(local.String())
	if err != nil {
		return false
	}
	h, port, err := net.SplitHostPort(host)
	if err != nil {
		return false // the port is always named: the server never listens on 80
	}
	if port != lport {
		return false
	}
	switch h {
	case "localhost", "127.0.0.1", "::1", strings.ToLower(lh):
		return true
	}
	return false
}

func (sec *security) corsAllowed(origin string) bool {
	return slices.Contains(sec.corsOrigins, strings.ToLower(strings.TrimRight(origin, "/")))
}

// sameOrigin reports whether a state-changing request comes from this server's
// own origin, from a --cors-origin, or from no browser page at all: its
// Origin (or, lacking one, Referer) names the Host it was sent to, and
// Sec-Fetch-Site does not say cross-site.
func (sec *security) sameOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin != "" {
		if sec.corsAllowed(origin) {
			return true
		}
		return originHost(origin) == strings.ToLower(r.Host)
	}
	if ref := r.Header.Get("Referer"); ref != "" {
		u, err := url.Parse(ref)
		if err != nil || u.Host == "" {
			return false
		}
		if sec.corsAllowed(u.Scheme + "://" + u.Host) {
			return true
		}
		return strings.ToLower(u.Host) == strings.ToLower(r.Host)
	}
	switch r.Header.Get("Sec-Fetch-Site") {
	case "cross-site", "same-site":
		return false
	}
	return true
}

// originHost is the host[:port] of an Origin header ("" for "null" or junk).
func originHost(origin string) string {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return ""
	}
	return strings.ToLower(u.Host)
}

func strconvQuote(s string) string {
	if len(s) > 100 {
		s = s[:100] + "…"
	}
	return `"` + strings.ReplaceAll(strings.ToValidUTF8(s, "?"), `"`, `\"`) + `"`
}

// revocable wraps a long answer (a continuous change feed, a streamed
// bucket configuration) so that it ends when its caller loses the right to
// it: at each change of the users the caller is looked up again
// (auth.Store.Refresh), and once it is deleted (a user of its name created
// since is not it) or no longer holds every permission perms names the
// request's context is cancelled, as a KV connection's next command finds
// its user gone. Short answers need none of this: every request
// authenticates anew.
func (s *server) revocable(perms permFunc, h apiHandler) apiHandler {
	return func(w http.ResponseWriter, r *http.Request) error {
		store, p := s.sec.store, principalOf(r)
		if store == nil || p == nil {
			return h(w, r)
		}
		need := perms(r)
		allowed := func() bool {
			cur, err := store.Refresh(p)
			if err != nil {
				return false
			}
			for _, perm := range need {
				if !cur.Allows(perm) {
					return false
				}
			}
			return true
		}
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		changed := store.Changed()
		if !allowed() { // changed since the request authenticated
			return &httpError{http.StatusUnauthorized, "unauthorized", "the user's access changed: authenticate again"}
		}
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-changed:
				}
				changed = store.Changed()
				if !allowed() {
					s.log.Info("stream ended: its user lost its access", "user", p.Name, "remote", r.RemoteAddr, "path", capString(r.URL.Path, maxLoggedPath))
					cancel()
					return
				}
			}
		}()
		return h(w, r.WithContext(ctx))
	}
}
