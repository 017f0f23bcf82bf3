package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/httpapi"
	"github.com/mayflydb/mayfly/pager"
	"github.com/mayflydb/mayfly/views"
)

// addUser stores a user with roles through the REST API, as the administrator.
func (f *fixture) addUser(name, pass, roles string) {
	f.t.Helper()
	st, _, body := f.do("PUT", "/settings/rbac/users/local/"+name, "application/x-www-form-urlencoded", "password="+pass+"&roles="+roles)
	if st != 200 {
		f.t.Fatalf("PUT user %s: %d %s", name, st, body)
	}
}

func TestUnauthenticatedIs401(t *testing.T) {
	f := newFixture(t)
	for _, c := range []struct{ user, pass string }{{"", ""}, {adminUser, "wrong"}, {adminUser, ""}, {"nobody", adminPass}} {
		for _, path := range []string{"/default/docs/a", "/pools/default/buckets", "/metrics", "/nowhere", "/settings/rbac/users"} {
			st, h, body := f.doAs(c.user, c.pass, "GET", path, "", "")
			if st != 401 || h.Get("WWW-Authenticate") != `Basic realm="Couchbase Server Admin / REST"` || jsonOf(t, body)["error"] != "unauthorized" {
				t.Errorf("%s as %q/%q: %d %v %s", path, c.user, c.pass, st, h, body)
			}
		}
	}
	if st, _, body := f.doAs("", "", "PUT", "/default/docs/a", "application/json", `1`); st != 401 {
		t.Fatalf("anonymous write: %d %s", st, body)
	}
	if _, err := f.eng.Bucket("default"); err != nil {
		t.Fatal(err)
	}
	if st, _, _ := f.do("GET", "/default/docs/a", "", ""); st != 404 {
		t.Fatalf("the anonymous write happened: %d", st)
	}
	if _, _, body := f.do("GET", "/metrics", "", ""); !strings.Contains(body, `mayfly_http_refused_total{reason="unauthenticated"} 21`) {
		t.Errorf("refusals not counted:\n%s", body)
	}
}

func TestRolesAndPermissions(t *testing.T) {
	f := newFixture(t)
	if st, _, body := f.do("POST", "/pools/default/buckets", "application/x-www-form-urlencoded", "name=other"); st/100 != 2 {
		t.Fatalf("create bucket: %d %s", st, body)
	}
	f.do("PUT", "/default/docs/a", "application/json", `{"x":1}`)
	f.do("PUT", "/other/docs/a", "application/json", `{"x":2}`)
	f.addUser("reader", "readerpw", "data_reader[default]")
	f.addUser("writer", "writerpw", "data_writer[*]")
	f.addUser("viewer", "viewerpw", "views_reader[default]")
	f.addUser("badmin", "badminpw", "bucket_admin[default]")
	f.addUser("ro", "ro_adminpw", "ro_admin")
	f.do("PUT", "/default/_design/d", "application/json", `{"views":{"v":{"map":"function (doc, meta) { emit(meta.id, null); }"}}}`)

	type req struct {
		user, method, path, ct, body string
		want                         int
	}
	pw := map[string]string{"reader": "readerpw", "writer": "writerpw", "viewer": "viewerpw", "badmin": "badminpw", "ro": "ro_adminpw"}
	for _, c := range []req{
		{"reader", "GET", "/default/docs/a", "", "", 200},
		{"reader", "PUT", "/default/docs/b", "application/json", `1`, 403},
		{"reader", "DELETE", "/default/docs/a", "", "", 403},
		{"reader", "GET", "/default/docs/a?touch=10", "", "", 403}, // get-and-touch writes
		{"reader", "GET", "/other/docs/a", "", "", 403},            // another bucket
		{"reader", "GET", "/pools/default/buckets/default/stats", "", "", 200},
		{"reader", "GET", "/pools/default/buckets/other/stats", "", "", 403},
		{"reader", "POST", "/pools/default/buckets/default/settings/expiryPager", "application/x-www-form-urlencoded", "exp_pager_stime=5", 403},
		{"reader", "GET", "/default/_design/d/_view/v?stale=false", "", "", 403},
		{"reader", "GET", "/metrics", "", "", 403},
		{"reader", "GET", "/settings/rbac/users", "", "", 403},
		{"writer", "PUT", "/other/docs/b", "application/json", `1`, 201},
		{"writer", "GET", "/other/docs/b", "", "", 403},
		{"writer", "POST", "/pools/default/buckets", "application/x-www-form-urlencoded", "name=third", 403},
		{"writer", "DELETE", "/pools/default/buckets/other", "", "", 403},
		{"viewer", "GET", "/default/_design/d/_view/v?stale=false", "", "", 200},
		{"viewer", "GET", "/default/_design/d/_view/v?stale=false&include_docs=true", "", "", 403}, // documents need data_reader
		{"viewer", "GET", "/default/_design/d/_view/v?stale=false&include_docs=TRUE", "", "", 403},
		{"viewer", "GET", "/default/_design/d/_view/v?stale=false&include_docs=false", "", "", 200},
		{"viewer", "PUT", "/default/_design/e", "application/json", `{"views":{}}`, 403},
		{"viewer", "GET", "/other/_design/d/_view/v", "", "", 403},
		{"badmin", "POST", "/pools/default/buckets/default/settings/expiryPager", "application/x-www-form-urlencoded", "exp_pager_stime=5", 200},
		{"badmin", "POST", "/pools/default/buckets/other/settings/expiryPager", "application/x-www-form-urlencoded", "exp_pager_stime=5", 403},
		{"badmin", "GET", "/default/docs/a", "", "", 403},
		{"badmin", "DELETE", "/pools/default/buckets/default", "", "", 403},
		{"ro", "GET", "/metrics", "", "", 200},
		{"ro", "GET", "/pools/default/buckets/other/stats", "", "", 200},
		{"ro", "GET", "/default/docs/a", "", "", 403},
		{"ro", "POST", "/pools/default/buckets/default", "application/x-www-form-urlencoded", "maxTTL=5", 403},
		{"ro", "PUT", "/settings/rbac/users/local/x", "application/x-www-form-urlencoded", "password=xxxxxx&roles=admin", 403},
	} {
		st, _, body := f.doAs(c.user, pw[c.user], c.method, c.path, c.ct, c.body)
		if st != c.want {
			t.Errorf("%s %s %s: %d %s, want %d", c.user, c.method, c.path, st, body, c.want)
			continue
		}
		if st == 403 {
			var m struct {
				Message     string
				Permissions []string
				Error       string
			}
			if json.Unmarshal([]byte(body), &m) != nil || m.Message != "Forbidden. User needs the following permissions" || len(m.Permissions) == 0 || m.Error != "forbidden" {
				t.Errorf("%s %s %s: 403 body %s", c.user, c.method, c.path, body)
			}
		}
	}
	st, _, body := f.doAs("reader", "readerpw", "PUT", "/default/docs/b", "application/json", `1`)
	if st != 403 || !strings.Contains(body, `"permissions":["cluster.bucket[default].data.docs!write"]`) {
		t.Errorf("403 body: %s", body)
	}
	// The bucket list shows only the caller's buckets.
	_, _, body = f.doAs("reader", "readerpw", "GET", "/pools/default/buckets", "", "")
	if !strings.Contains(body, `"name":"default"`) || strings.Contains(body, `"name":"other"`) {
		t.Errorf("reader's bucket list: %s", body)
	}
}

func TestUserEndpoints(t *testing.T) {
	f := newFixture(t)
	f.addUser("alice", "alicepw", "data_reader[default],views_reader[*]")
	st, _, body := f.do("GET", "/settings/rbac/users/local/alice", "", "")
	if st != 200 || !strings.Contains(body, `{"role":"data_reader","bucket_name":"default","origins":[{"type":"user"}]}`) ||
		!strings.Contains(body, `"password_change_date":"20`) || strings.Contains(body, "alicepw") || strings.Contains(body, "hash") {
		t.Fatalf("GET user: %d %s", st, body)
	}
	// Couchbase lists a domain's users at /settings/rbac/users/local (gocb's
	// GetAllUsers reads it) and every user at /settings/rbac/users.
	for _, path := range []string{"/settings/rbac/users", "/settings/rbac/users/local"} {
		st, _, body = f.do("GET", path, "", "")
		if st != 200 || !strings.Contains(body, `"id":"alice"`) || !strings.Contains(body, `"domain":"local"`) {
			t.Fatalf("GET %s: %d %s", path, st, body)
		}
		if st, _, _ := f.doAs("alice", "alicepw", "GET", path, "", ""); st != 403 {
			t.Errorf("alice lists users at %s: %d", path, st)
		}
	}
	st, _, body = f.do("GET", "/settings/rbac/roles", "", "")
	if st != 200 || !strings.Contains(body, `{"role":"data_reader","bucket_name":"*","name":"Data Reader"`) || !strings.Contains(body, `{"role":"admin","name":"Full Admin"`) {
		t.Fatalf("GET roles: %d %s", st, body)
	}
	for _, bad := range []string{"password=alicepw&roles=root", "password=alicepw&roles=data_reader", "password=short&roles=admin"} {
		if st, _, body := f.do("PUT", "/settings/rbac/users/local/bob", "application/x-www-form-urlencoded", bad); st != 400 {
			t.Errorf("%s: %d %s", bad, st, body)
		}
	}
	if st, _, body := f.do("PUT", "/settings/rbac/users/local/"+adminUser, "application/x-www-form-urlencoded", "password=xxxxxxxx&roles=ro_admin"); st != 400 {
		t.Errorf("overwriting the administrator: %d %s", st, body)
	}
	if st, _, _ := f.doAs("alice", "alicepw", "DELETE", "/settings/rbac/users/local/alice", "", ""); st != 403 {
		t.Errorf("alice deletes herself: %d", st)
	}
	if st, _, _ := f.do("DELETE", "/settings/rbac/users/local/alice", "", ""); st != 200 {
		t.Errorf("DELETE: %d", st)
	}
	if st, _, _ := f.doAs("alice", "alicepw", "GET", "/default/docs/a", "", ""); st != 401 {
		t.Errorf("a deleted user still gets in: %d", st)
	}
	if st, _, _ := f.do("DELETE", "/settings/rbac/users/local/alice", "", ""); st != 404 {
		t.Errorf("DELETE again: %d", st)
	}
}

// A role on a bucket that does not exist is refused, as Couchbase refuses
// it: given early, it would read whatever bucket is later created under the
// name. [*] is every bucket, present and future, and stays allowed.
func TestRoleOnMissingBucketRefused(t *testing.T) {
	f := newFixture(t)
	st, _, body := f.do("PUT", "/settings/rbac/users/local/carol", "application/x-www-form-urlencoded", "password=carolpw&roles=data_reader[travel],views_reader[*]")
	if st != 400 || !strings.Contains(body, "data_reader[travel]") || strings.Contains(body, "views_reader") {
		t.Fatalf("a role on bucket travel, which does not exist: %d %s; want 400 naming data_reader[travel] alone", st, body)
	}
	if st, _, _ := f.do("GET", "/settings/rbac/users/local/carol", "", ""); st != 404 {
		t.Fatalf("the refused user was stored: GET %d", st)
	}
	if st, _, body := f.do("POST", "/pools/default/buckets", "application/x-www-form-urlencoded", "name=travel&ramQuotaMB=100"); st/100 != 2 {
		t.Fatalf("create bucket travel: %d %s", st, body)
	}
	f.addUser("carol", "carolpw", "data_reader[travel],views_reader[*]")
	if st, _, body := f.doAs("carol", "carolpw", "GET", "/travel/docs/nothing", "", ""); st != 404 {
		t.Errorf("carol reads travel once it exists: %d %s; want 404 (no such document), not 403", st, body)
	}
}

func TestCrossOriginAndHost(t *testing.T) {
	f := newFixture(t)
	host := strings.TrimPrefix(f.srv.URL, "http://")
	admin := func(extra map[string]string) func(*http.Request) {
		return func(r *http.Request) {
			r.SetBasicAuth(adminUser, adminPass)
			for k, v := range extra {
				if k == "Host" {
					r.Host = v
				} else {
					r.Header.Set(k, v)
				}
			}
		}
	}
	for _, c := range []struct {
		name    string
		method  string
		headers map[string]string
		want    int
	}{
		{"evil origin", "POST", map[string]string{"Origin": "http://evil.example"}, 403},
		{"null origin", "POST", map[string]string{"Origin": "null"}, 403},
		{"evil referer", "POST", map[string]string{"Referer": "http://evil.example/page"}, 403},
		{"cross-site fetch", "POST", map[string]string{"Sec-Fetch-Site": "cross-site"}, 403},
		{"same origin", "POST", map[string]string{"Origin": "http://" + host}, 200},
		{"same referer", "POST", map[string]string{"Referer": "http://" + host + "/ui"}, 200},
		{"no browser", "POST", nil, 200},
		{"evil origin GET", "GET", map[string]string{"Origin": "http://evil.example"}, 200},
		{"foreign host", "GET", map[string]string{"Host": "evil.example"}, 421},
		{"rebound host", "GET", map[string]string{"Host": "evil.example:" + host[strings.LastIndex(host, ":")+1:]}, 421},
		{"localhost", "GET", map[string]string{"Host": "localhost:" + host[strings.LastIndex(host, ":")+1:]}, 200},
		{"other port", "GET", map[string]string{"Host": "127.0.0.1:1"}, 421},
	} {
		st, h, body := f.doWith(c.method, "/pools/default/buckets/default/settings/expiryPager", "application/x-www-form-urlencoded", "exp_pager_stime=5", admin(c.headers))
		if st != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, st, body, c.want)
		}
		if st >= 400 && jsonOf(t, body)["error"] == nil {
			t.Errorf("%s: not a JSON error: %s", c.name, body)
		}
		if h.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("%s: CORS header without --cors-origin", c.name)
		}
	}
	// A preflight without --cors-origin gets no CORS headers.
	_, h, _ := f.doWith("OPTIONS", "/default/docs/a", "", "", admin(map[string]string{"Origin": "http://evil.example", "Access-Control-Request-Method": "PUT"}))
	if h.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight answered with CORS headers: %v", h)
	}
	// A form body where none is taken (view queries) is refused: a browser
	// form could send it.
	st, _, body := f.do("POST", "/default/_design/d/_view/v", "application/x-www-form-urlencoded", `{"keys":[1]}`)
	if st != 415 {
		t.Errorf("form POST to a view: %d %s", st, body)
	}
}

func TestCORSOrigin(t *testing.T) {
	f := newFixture(t)
	users, _ := auth.Open(t.TempDir(), &auth.Options{AdminUser: adminUser, AdminPassword: adminPass, Argon2: cheapArgon2, ScramIterations: cheapScram})
	h := httpapi.New(f.eng, &httpapi.Options{Auth: users, CORSOrigins: []string{"https://console.example"}, AllowedHosts: []string{"db.example"}})
	srv := newServer(t, h)
	req, _ := http.NewRequest("OPTIONS", srv+"/default/docs/a", nil)
	req.Host = "db.example"
	req.Header.Set("Origin", "https://console.example")
	req.Header.Set("Access-Control-Request-Method", "PUT")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Origin") != "https://console.example" || !strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "Authorization") {
		t.Fatalf("preflight: %d %v", resp.StatusCode, resp.Header)
	}
	req, _ = http.NewRequest("PUT", srv+"/default/docs/a", strings.NewReader(`1`))
	req.Host = "db.example:8091"
	req.Header.Set("Origin", "https://console.example")
	req.SetBasicAuth(adminUser, adminPass)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 201 || resp.Header.Get("Access-Control-Allow-Origin") != "https://console.example" {
		t.Fatalf("CORS PUT: %d %v", resp.StatusCode, resp.Header)
	}
}

// newServer serves h on a test server closed with the test.
func newServer(t *testing.T, h http.Handler) string {
	srv := httptestServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestDotSegmentsAreNotRedirected(t *testing.T) {
	f := newFixture(t)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, path := range []string{"/default/docs/../../metrics", "/pools/default/buckets/./default", "/default/docs/%2e%2e/x", "/default/docs/a/.."} {
		req, _ := http.NewRequest("GET", f.srv.URL+path, nil)
		req.URL.Opaque = path // keep the dots: Go's client would not clean them, but be sure
		req.SetBasicAuth(adminUser, adminPass)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || resp.Header.Get("Location") != "" || jsonOf(t, string(b))["error"] != "bad_request" {
			t.Errorf("%s: %d %v %s", path, resp.StatusCode, resp.Header, b)
		}
	}
	// A doubled slash is a 404, not a redirect either.
	st, h, _ := f.do("GET", "//default/docs/a", "", "")
	if st != 404 || h.Get("Location") != "" {
		t.Errorf("//: %d %v", st, h)
	}
}

func TestConcurrencyCap(t *testing.T) {
	f := newFixture(t)
	users, _ := auth.Open(t.TempDir(), &auth.Options{AdminUser: adminUser, AdminPassword: adminPass, Argon2: cheapArgon2, ScramIterations: cheapScram})
	api := httpapi.New(f.eng, &httpapi.Options{Auth: users, MaxRequests: 1})
	// reading is closed when the slow PUT's handler first reads its body:
	// it holds the slot then (a handler reads only once admitted). Until
	// then a polling GET could take the slot first and the PUT be refused.
	reading := make(chan struct{})
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			r.Body = &firstRead{ReadCloser: r.Body, seen: reading}
		}
		api.ServeHTTP(w, r)
	}))
	// One request holds the only slot while its body trickles in.
	pr, pw := io.Pipe()
	req, _ := http.NewRequest("PUT", srv+"/default/docs/slow", pr)
	req.SetBasicAuth(adminUser, adminPass)
	var wg sync.WaitGroup
	wg.Add(1)
	var slowStatus int
	go func() {
		defer wg.Done()
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			slowStatus = resp.StatusCode
			resp.Body.Close()
		}
	}()
	pw.Write([]byte(`{"a":`))
	select {
	case <-reading:
	case <-time.After(time.Minute): // a hang guard
		t.Fatal("the slow PUT's handler never read its body")
	}
	// Polls until the slot is seen taken; only a hang reaches the deadline.
	deadline := time.Now().Add(time.Minute)
	var st int
	var body string
	for time.Now().Before(deadline) {
		r2, _ := http.NewRequest("GET", srv+"/default/docs/x", nil)
		r2.SetBasicAuth(adminUser, adminPass)
		resp, err := http.DefaultClient.Do(r2)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		st, body = resp.StatusCode, string(b)
		if st == 503 {
			if resp.Header.Get("Retry-After") == "" || jsonOf(t, body)["error"] != "too_many_requests" {
				t.Errorf("503: %v %s", resp.Header, body)
			}
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st != 503 {
		t.Errorf("over the cap: %d %s", st, body)
	}
	pw.Write([]byte(`1}`))
	pw.Close()
	wg.Wait()
	if slowStatus != 201 {
		t.Errorf("the slow request: %d", slowStatus)
	}
}

func TestMetricsToken(t *testing.T) {
	f := newFixture(t)
	users, _ := auth.Open(t.TempDir(), &auth.Options{AdminUser: adminUser, AdminPassword: adminPass, Argon2: cheapArgon2, ScramIterations: cheapScram})
	srv := newServer(t, httpapi.New(f.eng, &httpapi.Options{Auth: users, MetricsToken: "s3cret-token"}))
	get := func(path, token string) int {
		req, _ := http.NewRequest("GET", srv+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := get("/metrics", "s3cret-token"); st != 200 {
		t.Errorf("metrics with the token: %d", st)
	}
	if st := get("/metrics", "wrong"); st != 401 {
		t.Errorf("metrics with a wrong token: %d", st)
	}
	if st := get("/pools/default/buckets/default/stats", "s3cret-token"); st != 401 {
		t.Errorf("the token opened another endpoint: %d", st)
	}
}

// FuzzHandler sends arbitrary methods, paths, bodies and content types through
// the whole handler (as the administrator, and anonymously): no panic, and
// every 4xx or 5xx answer is a JSON object with an "error" or "message".
func FuzzHandler(f *testing.F) {
	for _, s := range []struct{ m, p, ct, body string }{
		{"GET", "/default/docs/a", "", ""},
		{"PUT", "/default/docs/a?expiry=5", "application/json", `{"x":1}`},
		{"POST", "/pools/default/buckets", "application/x-www-form-urlencoded", "name=b&maxTTL=x"},
		{"PUT", "/default/_design/d", "application/json", `{"views":{"v":{"map":"function(d,m){emit(m.id,1)}","reduce":"_count"}}}`},
		{"GET", "/default/_design/d/_view/v?group=true&startkey=[", "", ""},
		{"POST", "/default/_design/d/_view/v", "application/json", `{"keys":[1,"a"]}`},
		{"PUT", "/settings/rbac/users/local/u", "application/x-www-form-urlencoded", "password=abcdefg&roles=data_reader[default]"},
		{"DELETE", "/pools/default/buckets/%zz", "", ""},
		{"GET", "/default/docs/%2e%2e", "", ""},
		{"POST", "/pools/default/buckets/default/settings/expiryPager", "application/json", `{"exp_pager_stime":[]}`},
		{"GET", "/metrics", "", ""},
	} {
		f.Add(s.m, s.p, s.ct, s.body, true)
	}
	dir := f.TempDir()
	eng, err := engine.Open(dir, &engine.Options{NumPartitions: 4, NoSync: true})
	if err != nil {
		f.Fatal(err)
	}
	defer eng.Close()
	if _, err := eng.CreateBucket(context.Background(), engine.DefaultBucketSettings("default")); err != nil {
		f.Fatal(err)
	}
	users, err := auth.Open(f.TempDir(), &auth.Options{AdminUser: adminUser, AdminPassword: adminPass, Argon2: cheapArgon2, ScramIterations: cheapScram})
	if err != nil {
		f.Fatal(err)
	}
	vs, err := views.New(context.Background(), eng, nil)
	if err != nil {
		f.Fatal(err)
	}
	defer vs.Close()
	pm := pager.New(eng, nil)
	defer pm.Close(context.Background())
	h := httpapi.New(eng, &httpapi.Options{Auth: users, Views: vs, Pager: pm, AllowedHosts: []string{"example.com"}})
	methods := []string{"GET", "PUT", "POST", "DELETE", "HEAD", "OPTIONS", "PATCH"}
	f.Fuzz(func(t *testing.T, method, path, ct, body string, asAdmin bool) {
		if !slices.Contains(methods, method) {
			method = methods[len(method)%len(methods)]
		}
		req, err := http.NewRequest(method, "http://example.com"+path, strings.NewReader(body))
		if err != nil || !strings.HasPrefix(path, "/") {
			return
		}
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		if asAdmin {
			req.SetBasicAuth(adminUser, adminPass)
		}
		req.RemoteAddr = "192.0.2.1:1234"
		w := newRecorder()
		h.ServeHTTP(w, req)
		if w.Code >= 400 && method != "HEAD" {
			var m map[string]any
			if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil || (m["error"] == nil && m["message"] == nil) {
				t.Fatalf("%s %q: %d with a non-JSON error body %q", method, path, w.Code, w.Body.String())
			}
			if !strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") {
				t.Fatalf("%s %q: %d with Content-Type %q", method, path, w.Code, w.Header().Get("Content-Type"))
			}
		}
	})
}

func httptestServer(h http.Handler) *httptest.Server { return httptest.NewServer(h) }

func newRecorder() *httptest.ResponseRecorder { return httptest.NewRecorder() }

// firstRead closes seen at its first Read.
type firstRead struct {
	io.ReadCloser
	seen chan struct{}
	once sync.Once
}

func (f *firstRead) Read(p []byte) (int, error) {
	f.once.Do(func() { close(f.seen) })
	return f.ReadCloser.Read(p)
}
