package httpapi_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/httpapi"
	"github.com/mayflydb/mayfly/views"
)

// TestViewAnswerSaysIndexIsBehind: with an index that does not follow the
// feed, a stale=ok answer carries X-Mayfly-Index-Building and the pending
// count, a stale=false one does not; _info shows the build fields.
func TestViewAnswerSaysIndexIsBehind(t *testing.T) {
	eng, err := engine.Open(t.TempDir(), &engine.Options{NumPartitions: 4, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	b, err := eng.CreateBucket(ctx, engine.DefaultBucketSettings("default"))
	if err != nil {
		t.Fatal(err)
	}
	vs, err := views.New(ctx, eng, &views.Options{NoAutoUpdate: true})
	if err != nil {
		t.Fatal(err)
	}
	users, err := auth.Open(t.TempDir(), &auth.Options{AdminUser: adminUser, AdminPassword: adminPass, Argon2: cheapArgon2, ScramIterations: cheapScram})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(eng, &httpapi.Options{Views: vs, Auth: users}))
	defer func() { srv.Close(); vs.Close(); eng.Close() }()
	f := &fixture{t: t, eng: eng, srv: srv}
	if st, _, body := f.do("PUT", "/default/_design/d", "application/json", `{"views":{"v":{"map":"function (doc, meta) { emit(meta.id, null); }"}}}`); st != 201 && st != 200 {
		t.Fatalf("ddoc: %d %s", st, body)
	}
	for i := range 5 {
		if _, err := b.DefaultCollection().Upsert(ctx, fmt.Sprint("k", i), []byte(`{}`), nil); err != nil {
			t.Fatal(err)
		}
	}
	st, h, body := f.do("GET", "/default/_design/d/_view/v?stale=ok", "", "")
	if st != 200 || h.Get("X-Mayfly-Index-Building") != "true" || h.Get("X-Mayfly-Index-Pending") != "5" {
		t.Errorf("stale=ok: %d %v %s", st, h, body)
	}
	_, _, body = f.do("GET", "/default/_design/d/_info", "", "")
	if m := jsonOf(t, body); m["docs_to_index"] != float64(5) || m["building"] != false {
		t.Errorf("_info before: %s", body)
	}
	st, h, _ = f.do("GET", "/default/_design/d/_view/v?stale=false", "", "")
	if st != 200 || h.Get("X-Mayfly-Index-Building") != "" {
		t.Errorf("stale=false: %d %v", st, h)
	}
	_, _, body = f.do("GET", "/default/_design/d/_info", "", "")
	if m := jsonOf(t, body); m["docs_to_index"] != float64(0) || m["docs_indexed"] != float64(5) || m["eta_seconds"] != float64(0) {
		t.Errorf("_info after: %s", body)
	}
}
