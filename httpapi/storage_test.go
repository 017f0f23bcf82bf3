package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/httpapi"
	"github.com/mayflydb/mayfly/internal/testfs"
)

// A full disk answers 507 with the cause, the failed write is not readable,
// and the statistics say that the bucket refuses writes.
func TestFullDiskIs507(t *testing.T) {
	dir := testfs.MountSmall(t, 3<<20)
	eng, err := engine.Open(filepath.Join(dir, "data"), &engine.Options{Clock: engine.NewFakeClock(t0), NumPartitions: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if _, err := eng.CreateBucket(context.Background(), engine.DefaultBucketSettings("default")); err != nil {
		t.Fatal(err)
	}
	users, err := auth.Open(t.TempDir(), &auth.Options{AdminUser: adminUser, AdminPassword: adminPass, Argon2: cheapArgon2, ScramIterations: cheapScram})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(eng, &httpapi.Options{Auth: users}))
	defer srv.Close()
	body := `{"pad":"` + strings.Repeat("x", 16000) + `"}`
	f := &fixture{t: t, srv: srv}
	put := func(key string) (int, string) {
		t.Helper()
		code, _, b := f.do(http.MethodPut, "/default/docs/"+key, "", body)
		return code, b
	}
	var failedKey, reason string
	for i := range 1000 {
		key := fmt.Sprintf("k%d", i)
		status, b := put(key)
		if status == http.StatusInsufficientStorage {
			failedKey, reason = key, b
			break
		}
		if status != http.StatusCreated {
			t.Fatalf("PUT %s: %d %s", key, status, b)
		}
	}
	if failedKey == "" {
		t.Fatal("the disk never filled")
	}
	if !strings.Contains(reason, `"insufficient_storage"`) || !strings.Contains(reason, "no space left on device") || strings.Contains(reason, "engine:") {
		t.Errorf("507 body does not give the cause: %s", reason)
	}
	if status, _, b := f.do(http.MethodGet, "/default/docs/"+failedKey, "", ""); status != http.StatusNotFound {
		t.Errorf("GET of the failed write: %d %s, want 404", status, b)
	}
	if _, _, b := f.do(http.MethodGet, "/pools/default/buckets/default/stats", "", ""); !strings.Contains(b, `"ep_storage_failed":1`) {
		t.Errorf("stats do not show the failure: %s", b)
	}
}

// A couchbase bucket's REST answer names the store that keeps it, as
// Couchbase's storageBackend names couchstore or magma; an ephemeral
// bucket, which keeps nothing on disk, shows none.
func TestBucketStorageBackend(t *testing.T) {
	for _, kind := range []string{engine.StoragePebble, engine.StorageBolt} {
		f := newFixtureEngine(t, &engine.Options{Storage: kind}, nil, nil)
		if st, _, body := f.do("POST", "/pools/default/buckets", "application/json", `{"name":"cache","bucketType":"ephemeral"}`); st != 202 {
			t.Fatalf("create bucket: %d %s", st, body)
		}
		st, _, body := f.do("GET", "/pools/default/buckets/default", "", "")
		if m := jsonOf(t, body); st != 200 || m["storageBackend"] != kind {
			t.Errorf("%s: default bucket: %d %s", kind, st, body)
		}
		st, _, body = f.do("GET", "/pools/default/buckets/cache", "", "")
		if m := jsonOf(t, body); st != 200 || m["storageBackend"] != nil {
			t.Errorf("%s: ephemeral bucket: %d %s", kind, st, body)
		}
	}
}

// Flush over REST follows the bucket's flushEnabled, as Couchbase: off (the
// default value) it is refused with Couchbase's body and deletes nothing;
// on, the bucket shows controllers.flush and the flush deletes every
// document.
func TestBucketFlush(t *testing.T) {
	f := newFixture(t)
	form := "application/x-www-form-urlencoded"
	if st, _, body := f.do("PUT", "/default/docs/a", "", `{"v":1}`); st != 201 && st != 200 {
		t.Fatalf("put: %d %s", st, body)
	}
	const flush = "/pools/default/buckets/default/controller/doFlush"
	if st, _, body := f.do("POST", flush, form, ""); st != 400 || !strings.Contains(body, `"_":"Flush is disabled for the bucket"`) {
		t.Fatalf("flush with flushEnabled off: %d %s", st, body)
	}
	if st, _, body := f.do("GET", "/default/docs/a", "", ""); st != 200 {
		t.Fatalf("a refused flush deleted a document: %d %s", st, body)
	}
	if st, _, body := f.do("GET", "/pools/default/buckets/default", "", ""); st != 200 || strings.Contains(body, "controllers") {
		t.Fatalf("bucket without flushEnabled: %d %s", st, body)
	}
	if st, _, body := f.do("POST", "/pools/default/buckets/default", form, "flushEnabled=yes"); st != 400 || !strings.Contains(body, "flushEnabled") {
		t.Fatalf("flushEnabled=yes: %d %s", st, body)
	}
	if st, _, body := f.do("POST", "/pools/default/buckets/default", form, "flushEnabled=1"); st != 200 {
		t.Fatalf("flushEnabled=1: %d %s", st, body)
	}
	if st, _, body := f.do("GET", "/pools/default/buckets/default", "", ""); st != 200 || !strings.Contains(body, `"controllers":{"flush":"/pools/default/buckets/default/controller/doFlush"}`) {
		t.Fatalf("bucket with flushEnabled: %d %s", st, body)
	}
	if st, _, body := f.do("POST", flush, form, ""); st != 200 {
		t.Fatalf("flush: %d %s", st, body)
	}
	if st, _, body := f.do("GET", "/default/docs/a", "", ""); st != 404 {
		t.Fatalf("a document after the flush: %d %s", st, body)
	}
	if st, _, _ := f.do("POST", "/pools/default/buckets/nosuch/controller/doFlush", form, ""); st != 404 {
		t.Fatalf("flush of a missing bucket: %d", st)
	}
}
