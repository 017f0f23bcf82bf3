package httpapi_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
)

// newLevelFixture is a fixture whose engine gathers writes acknowledged from
// memory for an hour: such a write stays queued until something makes the
// flusher commit, so whether a write was on disk when answered shows
// without timing anything.
func newLevelFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureEngine(t, &engine.Options{FlushInterval: time.Hour}, nil, nil)
}

// queued reports whether bucket name has writes waiting for disk.
func (f *fixture) queued(name string) bool {
	st := f.mustBucket(name).Stats()
	return st.QueueSize+st.FlusherTodo > 0
}

func TestDurabilityMinLevelSetting(t *testing.T) {
	f := newFixture(t)
	form := "application/x-www-form-urlencoded"
	if st, _, body := f.do("GET", "/pools/default/buckets/default", "", ""); st != 200 || !strings.Contains(body, `"durabilityMinLevel":"persistToMajority"`) {
		t.Errorf("default bucket: %d %s, want durabilityMinLevel persistToMajority", st, body)
	}
	if st, _, body := f.do("POST", "/pools/default/buckets", form, "name=lo&durabilityMinLevel=none"); st != 202 || !strings.Contains(body, `"durabilityMinLevel":"none"`) {
		t.Errorf("create at none: %d %s", st, body)
	}
	if st, _, body := f.do("POST", "/pools/default/buckets/lo", form, "durabilityMinLevel=majority"); st != 200 || !strings.Contains(body, `"durabilityMinLevel":"majority"`) {
		t.Errorf("edit to majority: %d %s", st, body)
	}
	for _, bad := range []string{
		"name=x&durabilityMinLevel=strong",
		"name=x&bucketType=ephemeral&durabilityMinLevel=persistToMajority",
	} {
		st, _, body := f.do("POST", "/pools/default/buckets", form, bad)
		var ans struct {
			Errors map[string]string `json:"errors"`
		}
		json.Unmarshal([]byte(body), &ans)
		if st != 400 || !strings.HasPrefix(ans.Errors["durabilityMinLevel"], "Durability minimum level must be either none") {
			t.Errorf("%s: %d %s, want 400 with errors.durabilityMinLevel", bad, st, body)
		}
	}
	if st, _, body := f.do("POST", "/pools/default/buckets/lo", form, "durabilityMinLevel=all"); st != 400 || !strings.Contains(body, `"errors":{"durabilityMinLevel"`) {
		t.Errorf("edit to a bad level: %d %s", st, body)
	}
	if st, _, body := f.do("GET", "/pools/default/buckets/lo", "", ""); !strings.Contains(body, `"durabilityMinLevel":"majority"`) {
		t.Errorf("a refused edit changed the level: %d %s", st, body)
	}
}

// httpLevelCases is, for each bucket minimum and request level, whether a
// write is on disk when answered, written out rather than computed with
// engine.Durability.Max and Persists, so that a Max that lowered a level
// fails the test.
var httpLevelCases = []struct {
	min, req  engine.Durability
	persisted bool
}{
	{"none", "", false},
	{"none", "none", false},
	{"none", "majority", false},
	{"none", "majorityAndPersistActive", true},
	{"none", "persistToMajority", true},
	{"majority", "", false},
	{"majority", "none", false},
	{"majority", "majority", false},
	{"majority", "majorityAndPersistActive", true},
	{"majority", "persistToMajority", true},
	{"majorityAndPersistActive", "", true},
	{"majorityAndPersistActive", "none", true},
	{"majorityAndPersistActive", "majority", true},
	{"majorityAndPersistActive", "majorityAndPersistActive", true},
	{"majorityAndPersistActive", "persistToMajority", true},
	{"persistToMajority", "", true},
	{"persistToMajority", "none", true},
	{"persistToMajority", "majority", true},
	{"persistToMajority", "majorityAndPersistActive", true},
	{"persistToMajority", "persistToMajority", true},
}

// Each HTTP write, at each request level over each bucket minimum, is on
// disk when answered exactly as httpLevelCases says: a request's level
// raises the bucket's, never lowers it.
func TestDurabilityOverHTTPRaisesNeverLowers(t *testing.T) {
	f := newLevelFixture(t)
	form := "application/x-www-form-urlencoded"
	for _, tc := range httpLevelCases {
		min, req, want := tc.min, tc.req, tc.persisted
		name := "b-" + string(min)
		if _, err := f.eng.Bucket(name); err != nil {
			if st, _, body := f.do("POST", "/pools/default/buckets", form, "name="+name+"&durabilityMinLevel="+string(min)); st != 202 {
				t.Fatalf("create %s: %d %s", name, st, body)
			}
		}
		b := f.mustBucket(name)
		q := ""
		if req != "" {
			q = "?durability=" + string(req)
		}
		writes := []struct{ what, method, path, body string }{
			{"PUT", "PUT", "/" + name + "/docs/k" + q, `{"v":1}`},
			{"touch", "POST", "/" + name + "/docs/k/touch?expiry=100" + strings.Replace(q, "?", "&", 1), ""},
			{"get-and-touch", "GET", "/" + name + "/docs/k?touch=200" + strings.Replace(q, "?", "&", 1), ""},
			{"_bulk param", "POST", "/" + name + "/_bulk" + q, `{"op":"upsert","id":"k","doc":{"v":2}}` + "\n"},
			{"_bulk line", "POST", "/" + name + "/_bulk", fmt.Sprintf(`{"op":"upsert","id":"k","doc":{"v":3},"durability":%q}`, req) + "\n"},
			{"DELETE", "DELETE", "/" + name + "/docs/k" + q, ""},
		}
		for _, w := range writes {
			st, _, body := f.do(w.method, w.path, "application/json", w.body)
			if st >= 300 || strings.Contains(body, `"error"`) {
				t.Fatalf("%s %s: %d %s", w.what, w.path, st, body)
			}
			if got := !f.queued(name); got != want {
				t.Errorf("min %s, request %q, %s: on disk when answered %v, want %v", min, req, w.what, got, want)
			}
			if !want {
				// Read-your-writes: the answer's write is readable at once.
				st, _, _ := f.do("GET", "/"+name+"/docs/k", "", "")
				if wantSt := map[bool]int{true: 404, false: 200}[w.what == "DELETE"]; st != wantSt {
					t.Errorf("min %s, request %q, %s: read after the write %d, want %d", min, req, w.what, st, wantSt)
				}
			}
			if err := b.Sync(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestDurabilityParamRefused(t *testing.T) {
	f := newFixture(t)
	for _, w := range []struct{ method, path, body string }{
		{"PUT", "/default/docs/k?durability=strong", `1`},
		{"DELETE", "/default/docs/k?durability=1", ""},
		{"POST", "/default/docs/k/touch?expiry=1&durability=x", ""},
		{"POST", "/default/_bulk?durability=x", `{"id":"k","doc":1}` + "\n"},
	} {
		if st, _, body := f.do(w.method, w.path, "application/json", w.body); st != 400 || !strings.Contains(body, "durability") {
			t.Errorf("%s %s: %d %s, want 400 naming durability", w.method, w.path, st, body)
		}
	}
	st, _, body := f.do("POST", "/default/_bulk", "application/json", `{"op":"upsert","id":"a","doc":1,"durability":"fast"}`+"\n"+`{"op":"upsert","id":"b","doc":2}`+"\n")
	lines := strings.Split(strings.TrimSpace(body), "\n")
	if st != 200 || len(lines) != 2 || !strings.Contains(lines[0], "durability") || strings.Contains(lines[1], "error") {
		t.Errorf("_bulk with a bad line level: %d %s", st, body)
	}
	if st, _, _ := f.do("GET", "/default/docs/a", "", ""); st != 404 {
		t.Errorf("a line with a bad level was written: %d", st)
	}
}

// At none, a write is readable at once, and reaches the change feed once
// committed: a feed asked for commits what waits for disk before it reads.
func TestDurabilityNoneFeedAfterCommit(t *testing.T) {
	f := newLevelFixture(t)
	if st, _, body := f.do("PUT", "/default/docs/k?durability=none", "", `{"v":1}`); st >= 300 {
		t.Fatalf("PUT: %d %s", st, body)
	}
	// The default bucket persists: the request's none is raised.
	if f.queued("default") {
		t.Fatal("write to a persistToMajority bucket answered before its commit")
	}
	f.do("POST", "/pools/default/buckets/default", "application/x-www-form-urlencoded", "durabilityMinLevel=none")
	if st, _, body := f.do("PUT", "/default/docs/n", "", `{"v":2}`); st >= 300 {
		t.Fatalf("PUT: %d %s", st, body)
	}
	if st, _, body := f.do("GET", "/default/docs/n", "", ""); st != 200 || body != `{"v":2}` {
		t.Errorf("read-your-write at none: %d %s", st, body)
	}
	if !f.queued("default") {
		t.Fatal("write at none on disk when answered")
	}
	// The feed shows what is on disk: asking for it commits the write
	// first, so the feed has it and a crash cannot take it back.
	_, _, feed := f.do("GET", "/default/_changes", "", "")
	if !strings.Contains(feed, `"n"`) {
		t.Errorf("change feed lacks a write answered before it was asked for: %s", feed)
	}
	if f.queued("default") {
		t.Error("the change feed answered with writes still waiting for disk")
	}
}

// A level that persists is refused on a bucket that keeps nothing on disk,
// on every write path, as the KV port and Couchbase refuse it: before, the
// write was answered as if on disk and lost to the next restart. Its
// durabilityMinLevel's levels go through.
func TestDurabilityPersistingLevelRefusedWithoutDisk(t *testing.T) {
	f := newFixture(t)
	form := "application/x-www-form-urlencoded"
	if st, _, body := f.do("POST", "/pools/default/buckets", form, "name=eph&bucketType=ephemeral"); st != 202 {
		t.Fatalf("create: %d %s", st, body)
	}
	if st, _, body := f.do("PUT", "/eph/docs/there?durability=majority", "application/json", `1`); st != 201 {
		t.Fatalf("PUT at majority on an ephemeral bucket: %d %s", st, body)
	}
	for _, w := range []struct{ method, path, body string }{
		{"PUT", "/eph/docs/k?durability=persistToMajority", `1`},
		{"POST", "/eph/docs/there/touch?expiry=100&durability=majorityAndPersistActive", ""},
		{"GET", "/eph/docs/there?touch=100&durability=persistToMajority", ""},
		{"DELETE", "/eph/docs/there?durability=persistToMajority", ""},
	} {
		if st, _, body := f.do(w.method, w.path, "application/json", w.body); st != 400 || !strings.Contains(body, "durability") {
			t.Errorf("%s %s: %d %s, want 400 naming durability", w.method, w.path, st, body)
		}
	}
	st, _, body := f.do("POST", "/eph/_bulk", "application/json",
		`{"op":"upsert","id":"k","doc":1,"durability":"persistToMajority"}`+"\n"+`{"op":"upsert","id":"b","doc":2,"durability":"majority"}`+"\n")
	lines := strings.Split(strings.TrimSpace(body), "\n")
	if st != 200 || len(lines) != 2 || !strings.Contains(lines[0], "durability") || strings.Contains(lines[1], "error") {
		t.Errorf("_bulk with a persisting line level on an ephemeral bucket: %d %s", st, body)
	}
	if st, _, body := f.do("POST", "/eph/_bulk?durability=persistToMajority", "application/json", `{"op":"upsert","id":"k","doc":1}`+"\n"); st != 200 || !strings.Contains(body, "durability") {
		t.Errorf("_bulk?durability=persistToMajority on an ephemeral bucket: %d %s, want the line refused naming durability", st, body)
	}
	if st, _, _ := f.do("GET", "/eph/docs/k", "", ""); st != 404 {
		t.Errorf("a write refused for its level was made: GET %d", st)
	}
	if st, _, _ := f.do("GET", "/eph/docs/there", "", ""); st != 200 {
		t.Errorf("a delete refused for its level was made: GET %d", st)
	}
}

// A memcached bucket takes no durability level but none, on every write
// path, as its durabilityMinLevel takes none alone and Couchbase offers no
// durable writes on memcached buckets: before, majority was accepted.
func TestDurabilityRefusedOnMemcachedBucket(t *testing.T) {
	f := newFixture(t)
	form := "application/x-www-form-urlencoded"
	if st, _, body := f.do("POST", "/pools/default/buckets", form, "name=mc&bucketType=memcached"); st != 202 {
		t.Fatalf("create: %d %s", st, body)
	}
	if st, _, body := f.do("POST", "/pools/default/buckets/mc", form, "durabilityMinLevel=majority"); st != 400 || !strings.Contains(body, "memcached") {
		t.Fatalf("durabilityMinLevel=majority on a memcached bucket: %d %s, want 400", st, body)
	}
	if st, _, body := f.do("PUT", "/mc/docs/there?durability=none", "application/json", `1`); st != 201 {
		t.Fatalf("PUT at none on a memcached bucket: %d %s", st, body)
	}
	for _, w := range []struct{ method, path, body string }{
		{"PUT", "/mc/docs/k?durability=majority", `1`},
		{"POST", "/mc/docs/there/touch?expiry=100&durability=majority", ""},
		{"DELETE", "/mc/docs/there?durability=majority", ""},
	} {
		if st, _, body := f.do(w.method, w.path, "application/json", w.body); st != 400 || !strings.Contains(body, "durability") || !strings.Contains(body, "memcached") {
			t.Errorf("%s %s: %d %s, want 400 naming durability and memcached", w.method, w.path, st, body)
		}
	}
	st, _, body := f.do("POST", "/mc/_bulk", "application/json",
		`{"op":"upsert","id":"k","doc":1,"durability":"majority"}`+"\n"+`{"op":"upsert","id":"b","doc":2,"durability":"none"}`+"\n")
	lines := strings.Split(strings.TrimSpace(body), "\n")
	if st != 200 || len(lines) != 2 || !strings.Contains(lines[0], "memcached") || strings.Contains(lines[1], "error") {
		t.Errorf("_bulk with a majority line on a memcached bucket: %d %s", st, body)
	}
	if st, _, body := f.do("POST", "/mc/_bulk?durability=majority", "application/json", `{"op":"upsert","id":"k","doc":1}`+"\n"); st != 200 || !strings.Contains(body, "memcached") {
		t.Errorf("_bulk?durability=majority on a memcached bucket: %d %s, want the line refused", st, body)
	}
	if st, _, _ := f.do("GET", "/mc/docs/k", "", ""); st != 404 {
		t.Errorf("a write refused for its level was made: GET %d", st)
	}
	if st, _, _ := f.do("GET", "/mc/docs/there", "", ""); st != 200 {
		t.Errorf("a delete refused for its level was made: GET %d", st)
	}
}
