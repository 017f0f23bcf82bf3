package httpapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/audit"
	"github.com/mayflydb/mayfly/httpapi"
)

const form = "application/x-www-form-urlencoded"

// auditEvents returns the audit log's records, after checking its chain.
func (f *fixture) auditEvents() []audit.Event {
	f.t.Helper()
	file, err := os.Open(f.audit)
	if err != nil {
		f.t.Fatal(err)
	}
	defer file.Close()
	if _, err := audit.Verify(file); err != nil {
		f.t.Fatalf("audit log broken: %v", err)
	}
	b, _ := os.ReadFile(f.audit)
	var out []audit.Event
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		var e audit.Event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			f.t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

// js is a JSON value as the audit log holds it, compacted.
func js(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// norm is a JSON text with its object keys sorted, as a decoded record
// shows it.
func norm(s string) string {
	var v any
	json.Unmarshal([]byte(s), &v)
	return js(v)
}

// TestAuditedActions: every administrative action writes its record, with
// what it changes; refused requests write none; a failure after the record
// writes a follow-up.
func TestAuditedActions(t *testing.T) {
	f := newFixture(t)
	const ddoc = `{"views":{"v":{"map":"function (doc) { emit(doc.x, null) }"}}}`
	const ddoc2 = `{"views":{"w":{"map":"function (doc) { emit(doc.y, null) }"}}}`
	steps := []struct {
		method, path, ctype, body string
		status                    int
	}{
		{"POST", "/pools/default/buckets", form, "name=b2&bucketType=ephemeral&ramQuotaMB=200", 202},
		{"POST", "/pools/default/buckets", form, "name=b2", 400},           // exists: not recorded
		{"POST", "/pools/default/buckets", form, "name=b3&maxTTL=-1", 400}, // invalid: not recorded
		{"POST", "/pools/default/buckets/b2", form, "maxTTL=60&purgeInterval=2", 200},
		{"POST", "/pools/default/buckets/b2", form, "maxTTL=60", 200}, // no change: not recorded
		{"POST", "/pools/default/buckets/b2/scopes", form, "name=s1", 200},
		{"POST", "/pools/default/buckets/b2/scopes/s1/collections", form, "name=c1&maxTTL=5", 200},
		{"POST", "/pools/default/buckets/b2/scopes/s1/collections", form, "name=c1", 400}, // exists: intent, then failed
		{"PUT", "/default/_design/dev_d", "application/json", ddoc, 201},
		{"PUT", "/default/_design/dev_d", "application/json", ddoc2, 201},
		{"DELETE", "/default/_design/dev_d", "", "", 200},
		{"DELETE", "/default/_design/dev_d", "", "", 404}, // missing: not recorded
		{"POST", "/pools/default/buckets/b2/settings/expiryPager", form, "exp_pager_stime=5&exp_pager_initial_run_time=3", 200},
		{"POST", "/pools/default/buckets/b2/settings/expiryPager", form, "exp_pager_stime=-5", 400},
		{"DELETE", "/pools/default/buckets/b2", "", "", 200},
		{"DELETE", "/pools/default/buckets/b2", "", "", 404},
	}
	var uuid string // b2's: its deletion names the incarnation deleted
	for _, s := range steps {
		if s.method == "DELETE" && uuid == "" {
			b, err := f.eng.Bucket("b2")
			if err != nil {
				t.Fatal(err)
			}
			uuid = b.Settings().UUID
		}
		if code, _, body := f.do(s.method, s.path, s.ctype, s.body); code != s.status {
			t.Fatalf("%s %s %s: %d %s, want %d", s.method, s.path, s.body, code, body, s.status)
		}
	}
	type row struct{ action, bucket, target, before, after, outcome string }
	var got []row
	for _, e := range f.auditEvents() {
		if e.Time != t0 || !strings.HasPrefix(e.Remote, "127.0.0.1:") || e.User != adminUser {
			t.Errorf("event %+v: time, remote or user", e)
		}
		got = append(got, row{e.Action, e.Bucket, e.Target, js(e.Before), js(e.After), e.Outcome})
	}
	settings := norm(`{"name":"b2","bucketType":"ephemeral","maxTTL":0,"ramQuotaMB":200,"purgeInterval":3,"exp_pager_stime":3600,"exp_pager_initial_run_time":-1}`)
	want := []row{
		{"bucket.create", "b2", "", "null", settings, ""},
		{"bucket.settings", "b2", "", `{"maxTTL":0,"purgeInterval":3}`, `{"maxTTL":60,"purgeInterval":2}`, ""},
		{"scope.create", "b2", "s1", "null", "null", ""},
		{"collection.create", "b2", "s1.c1", "null", `{"maxTTL":5}`, ""},
		{"collection.create", "b2", "s1.c1", "null", `{"maxTTL":0}`, ""},
		{"collection.create", "b2", "s1.c1", "null", "null", "failed"},
		{"ddoc.put", "default", "dev_d", "null", js(json.RawMessage(ddoc)), ""},
		{"ddoc.put", "default", "dev_d", js(json.RawMessage(ddoc)), js(json.RawMessage(ddoc2)), ""},
		{"ddoc.delete", "default", "dev_d", js(json.RawMessage(ddoc2)), "null", ""},
		{"pager.settings", "b2", "", `{"exp_pager_initial_run_time":-1,"exp_pager_stime":3600}`, `{"exp_pager_initial_run_time":3,"exp_pager_stime":5}`, ""},
		{"bucket.delete", "b2", "", norm(`{"name":"b2","bucketType":"ephemeral","maxTTL":60,"ramQuotaMB":200,"purgeInterval":2,"exp_pager_stime":5,"exp_pager_initial_run_time":3,"evictionPolicy":"noEviction","durabilityMinLevel":"none","numVBuckets":16,"replicaNumber":1,"uuid":"` + uuid + `"}`), "null", ""},
	}
	if len(got) != len(want) {
		t.Fatalf("%d records:\n%v\nwant %d:\n%v", len(got), got, len(want), want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("record %d:\n got %v\nwant %v", i+1, got[i], want[i])
		}
	}
	if ev := f.auditEvents(); ev[5].Ref != ev[4].Seq || !strings.Contains(ev[5].Error, "exists") {
		t.Errorf("failed follow-up: %+v", ev[5])
	}
}

// TestAuditUnwritableRefuses: with the audit log closed, every
// administrative action is refused with audit_failed and not done.
func TestAuditUnwritableRefuses(t *testing.T) {
	f := newFixture(t)
	f.do("PUT", "/default/_design/dev_d", "application/json", `{"views":{"v":{"map":"function (doc) { emit(doc.x, null) }"}}}`)
	f.do("POST", "/pools/default/buckets/default/scopes", form, "name=s1")
	before := f.auditEvents()
	if err := f.al.Close(); err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct{ method, path, ctype, body string }{
		{"POST", "/pools/default/buckets", form, "name=b2"},
		{"POST", "/pools/default/buckets/default", form, "maxTTL=60"},
		{"POST", "/pools/default/buckets/default/scopes", form, "name=s2"},
		{"POST", "/pools/default/buckets/default/scopes/s1/collections", form, "name=c1"},
		{"PUT", "/default/_design/dev_e", "application/json", `{"views":{}}`},
		{"DELETE", "/default/_design/dev_d", "", ""},
		{"POST", "/pools/default/buckets/default/settings/expiryPager", form, "exp_pager_stime=5"},
		{"DELETE", "/pools/default/buckets/default", "", ""},
	} {
		code, _, body := f.do(s.method, s.path, s.ctype, s.body)
		if code != 500 || jsonOf(t, body)["error"] != "audit_failed" {
			t.Errorf("%s %s with the audit log closed: %d %s", s.method, s.path, code, body)
		}
	}
	b := f.mustBucket("default")
	if _, err := f.eng.Bucket("b2"); err == nil {
		t.Error("bucket b2 created")
	}
	if st := b.Settings(); st.MaxTTL != 0 || st.ExpPagerStime != 3600 {
		t.Errorf("settings changed: %+v", st)
	}
	if len(b.Scopes()) != 2 { // _default and s1
		t.Errorf("scopes: %+v", b.Scopes())
	}
	for _, sc := range b.Scopes() {
		if sc.Name == "s1" && len(sc.Collections) != 0 {
			t.Errorf("collection created: %+v", sc)
		}
	}
	if code, _, _ := f.do("GET", "/default/_design/dev_d", "", ""); code != 200 {
		t.Error("design document deleted")
	}
	if code, _, _ := f.do("GET", "/default/_design/dev_e", "", ""); code != 404 {
		t.Error("design document created")
	}
	if after := f.auditEvents(); len(after) != len(before) {
		t.Errorf("records written after Close: %d, were %d", len(after), len(before))
	}
}

// TestAuditWriteErrorRefuses: an audit log whose writes fail (a full disk)
// refuses the action, and every later one.
func TestAuditWriteErrorRefuses(t *testing.T) {
	f := newFixture(t)
	full, err := audit.Open("/dev/full")
	if err != nil {
		t.Skip("no /dev/full:", err)
	}
	defer full.Close()
	srv := httptest.NewServer(httpapi.New(f.eng, &httpapi.Options{Audit: full, Auth: f.users}))
	defer srv.Close()
	for range 2 {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/pools/default/buckets", strings.NewReader(url.Values{"name": {"b2"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.SetBasicAuth(adminUser, adminPass)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 500 || jsonOf(t, string(body))["error"] != "audit_failed" {
			t.Fatalf("create with a full disk: %d %s", resp.StatusCode, body)
		}
	}
	if _, err := f.eng.Bucket("b2"); err == nil {
		t.Fatal("bucket created")
	}
}

// User changes and failed logins are in the audit log, with who did them and
// never a password.
func TestAuditUsersAndFailedLogins(t *testing.T) {
	f := newFixture(t)
	form := "application/x-www-form-urlencoded"
	if status, _, body := f.do(http.MethodPut, "/settings/rbac/users/local/ann", form, "password=s3cret-pw&roles=data_reader[default]"); status != http.StatusOK {
		t.Fatalf("put user: %d %s", status, body)
	}
	if status, _, _ := f.doAs("ann", "wrong", http.MethodGet, "/default/docs/x", "", ""); status != http.StatusUnauthorized {
		t.Fatalf("wrong password: %d", status)
	}
	if status, _, body := f.do(http.MethodDelete, "/settings/rbac/users/local/ann", "", ""); status != http.StatusOK {
		t.Fatalf("delete user: %d %s", status, body)
	}
	var got []string
	for _, e := range f.auditEvents() {
		got = append(got, e.Action+" "+e.User+" "+e.Target)
	}
	want := []string{"user.put Administrator ann", "login.failed  ann", "user.delete Administrator ann"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("audit events %q, want %q", got, want)
	}
	raw, err := os.ReadFile(f.audit)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "s3cret-pw") || strings.Contains(string(raw), "wrong") {
		t.Errorf("a password reached the audit log: %s", raw)
	}
}
