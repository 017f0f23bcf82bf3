package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/audit"
	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/httpapi"
	"github.com/mayflydb/mayfly/views"
)

// TestSkippedDesignDocCanBeReadReplacedDeleted: a stored design document
// skipped at start (serve --skip-design-docs) is not loaded, and its owner
// can read its source (GET), replace it with a fixed version (PUT 201) or
// delete it (DELETE 200), the audited writes recording its stored body.
func TestSkippedDesignDocCanBeReadReplacedDeleted(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	stored := `{"views":{"v":{"map":"function (doc, meta) { emit(meta.id, null); }"}}}`
	eng, err := engine.Open(dir, &engine.Options{NumPartitions: 4, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.CreateBucket(ctx, engine.DefaultBucketSettings("default")); err != nil {
		t.Fatal(err)
	}
	vs, err := views.New(ctx, eng, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"gone", "fixed"} {
		if _, err := vs.PutDesignDoc(ctx, "default", name, []byte(stored)); err != nil {
			t.Fatal(err)
		}
	}
	vs.Close()
	eng.Close()

	eng, err = engine.Open(dir, &engine.Options{NumPartitions: 4, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	vs, err = views.New(ctx, eng, &views.Options{SkipDesignDocs: []string{"default/_design/gone", "default/_design/fixed"}})
	if err != nil {
		t.Fatal(err)
	}
	users, err := auth.Open(t.TempDir(), &auth.Options{AdminUser: adminUser, AdminPassword: adminPass, Argon2: cheapArgon2, ScramIterations: cheapScram})
	if err != nil {
		t.Fatal(err)
	}
	auditPath := filepath.Join(t.TempDir(), audit.FileName)
	al, err := audit.Open(auditPath)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(eng, &httpapi.Options{Views: vs, Auth: users, Audit: al}))
	defer func() { srv.Close(); al.Close(); vs.Close(); eng.Close() }()
	f := &fixture{t: t, eng: eng, srv: srv, audit: auditPath}
	if _, err := vs.DesignDoc(ctx, "default", "gone"); err == nil {
		t.Fatal("a skipped design document was loaded")
	}

	// Its stored source can be read, to be fixed.
	st, h, body := f.do("GET", "/default/_design/gone", "", "")
	if st != 200 || body != stored || !strings.Contains(h.Get("X-Couchbase-Meta"), `"rev":"1-`) {
		t.Fatalf("GET skipped: %d %v %s", st, h.Get("X-Couchbase-Meta"), body)
	}
	if st, _, body := f.do("DELETE", "/default/_design/gone", "", ""); st != 200 || jsonOf(t, body)["id"] != "_design/gone" {
		t.Fatalf("DELETE skipped: %d %s", st, body)
	}
	if st, _, body := f.do("GET", "/default/_design/gone", "", ""); st != 404 {
		t.Fatalf("GET deleted: %d %s", st, body)
	}
	if st, _, body := f.do("DELETE", "/default/_design/gone", "", ""); st != 404 {
		t.Fatalf("DELETE deleted: %d %s", st, body)
	}

	fixed := `{"views":{"v":{"map":"function (doc, meta) { emit(1, null); }"}}}`
	if st, _, body := f.do("PUT", "/default/_design/fixed", "application/json", fixed); st != 201 {
		t.Fatalf("PUT over skipped: %d %s", st, body)
	}
	if st, _, body := f.do("GET", "/default/_design/fixed", "", ""); st != 200 || body != fixed {
		t.Fatalf("GET replaced: %d %s", st, body)
	}
	f.do("PUT", "/default/docs/a", "application/json", `{}`)
	if st, _, body := f.do("GET", "/default/_design/fixed/_view/v?stale=false", "", ""); st != 200 || !strings.Contains(body, `"key":1`) {
		t.Fatalf("query replaced: %d %s", st, body)
	}
	var got []string
	for _, e := range f.auditEvents() {
		got = append(got, e.Action+" "+e.Target+" "+js(e.Before)+" "+js(e.After))
	}
	want := []string{
		"ddoc.delete gone " + js(json.RawMessage(stored)) + " null",
		"ddoc.put fixed " + js(json.RawMessage(stored)) + " " + js(json.RawMessage(fixed)),
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("audit records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
