package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/httpapi"
	"github.com/mayflydb/mayfly/views"
)

// TestFullEvictionOverHTTP: a couchbase bucket created with
// evictionPolicy=fullEviction and a 1 MiB quota (the least the settings
// take) holds more 4 KB documents than its quota, with whole items out of
// memory; every document reads back intact before and after a restart of
// the server over the same directory, curr_items counts them all, a view
// and _changes see every one, the bucket's answer shows the policy, the
// statistics show the Bloom filters kept. (A change of the policy:
// evictchange_test.go.)
func TestFullEvictionOverHTTP(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir, authDir := t.TempDir(), t.TempDir()
	var f *fixture
	var shut func()
	start := func() {
		eng, err := engine.Open(dir, &engine.Options{NumPartitions: 8})
		if err != nil {
			t.Fatal(err)
		}
		vs, err := views.New(ctx, eng, nil)
		if err != nil {
			t.Fatal(err)
		}
		store, err := auth.Open(authDir, &auth.Options{Argon2: cheapArgon2, ScramIterations: cheapScram, AdminUser: adminUser, AdminPassword: adminPass})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(httpapi.New(eng, &httpapi.Options{Views: vs, Auth: store}))
		f = &fixture{t: t, eng: eng, srv: srv, users: store}
		shut = func() {
			srv.Close()
			vs.Close()
			if err := eng.Check(ctx); err != nil {
				t.Errorf("engine.Check: %v", err)
			}
			if err := eng.Close(); err != nil {
				t.Error(err)
			}
		}
	}
	start()
	defer func() { shut() }()

	if st, _, body := f.do("POST", "/pools/default/buckets", formCT, "name=fe&bucketType=couchbase&ramQuota=1&evictionPolicy=fullEviction"); st != 202 || !strings.Contains(body, `"evictionPolicy":"fullEviction"`) {
		t.Fatalf("create fullEviction bucket: %d %s", st, body)
	}
	const n = 600 // 2.4 MB of values in a 1 MiB quota
	pad := strings.Repeat("x", 4000)
	key := func(i int) string { return fmt.Sprintf("k%03d", i) }
	for i := range n {
		if st, _, body := f.do("PUT", "/fe/docs/"+key(i), "application/json", fmt.Sprintf(`{"n":%d,"pad":"%s"}`, i, pad)); st != 200 && st != 201 {
			t.Fatalf("put %d: %d %s", i, st, body)
		}
	}
	stats := func() map[string]any {
		t.Helper()
		_, _, body := f.do("GET", "/pools/default/buckets/fe/stats", "", "")
		var m map[string]any
		if err := json.Unmarshal([]byte(body), &m); err != nil {
			t.Fatal(body)
		}
		return m
	}
	readAll := func(when string) {
		t.Helper()
		for i := range n {
			st, _, body := f.do("GET", "/fe/docs/"+key(i), "", "")
			if st != 200 || !strings.Contains(body, fmt.Sprintf(`"n":%d,`, i)) || !strings.Contains(body, pad) {
				t.Fatalf("%s: get %s: %d %.80s", when, key(i), st, body)
			}
		}
		if st, _, body := f.do("GET", "/fe/docs/never", "", ""); st != 404 {
			t.Fatalf("%s: get of a key never written: %d %.80s", when, st, body)
		}
		if s := stats(); s["curr_items"] != float64(n) || s["ep_bfilter_enabled"] != float64(1) {
			t.Fatalf("%s: curr_items %v (want %d), ep_bfilter_enabled %v", when, s["curr_items"], n, s["ep_bfilter_enabled"])
		}
		st, _, body := f.do("GET", "/fe/_design/d/_view/v?stale=false&reduce=true", "", "")
		if st != 200 || !strings.Contains(body, fmt.Sprintf(`"value":%d`, n)) {
			t.Fatalf("%s: view count: %d %.200s", when, st, body)
		}
		st, _, body = f.do("GET", "/fe/_changes", "", "")
		var changes struct {
			Results []struct {
				ID string `json:"id"`
			} `json:"results"`
		}
		if err := json.Unmarshal([]byte(body), &changes); st != 200 || err != nil {
			t.Fatalf("%s: _changes: %d %v %.200s", when, st, err, body)
		}
		seen := map[string]bool{}
		for _, r := range changes.Results {
			seen[r.ID] = true
		}
		if len(seen) != n {
			t.Fatalf("%s: _changes shows %d of %d documents", when, len(seen), n)
		}
	}
	if st, _, body := f.do("PUT", "/fe/_design/d", "application/json", `{"views":{"v":{"map":"function (doc, meta) { emit(doc.n, null); }","reduce":"_count"}}}`); st != 201 {
		t.Fatalf("design document: %d %s", st, body)
	}
	b, err := f.eng.Bucket("fe")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if st := b.Stats(); st.CurrItems != n || st.NonResident == 0 {
		t.Fatalf("after %d writes of 4 KB into 1 MiB: %d items, %d not resident", n, st.CurrItems, st.NonResident)
	}
	readAll("before the restart")

	shut()
	start()
	b, err = f.eng.Bucket("fe")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.WaitWarm(ctx); err != nil {
		t.Fatal(err)
	}
	readAll("after the restart")
}
