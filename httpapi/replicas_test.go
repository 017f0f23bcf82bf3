package httpapi_test

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/httpapi"
)

// TestBucketReplicaNumber: POST /pools/default/buckets takes Couchbase's
// replicaNumber, 0..3 (outside it, or not an integer, a 400 with
// Couchbase's errors object naming it, and no bucket); a bucket created
// without it has Couchbase's default, 1; GET shows it (an SDK's GetBucket
// reads it), an update on a single node may change it, and it is kept
// when the server starts again. On the old code the parameter was
// dropped: GET had no replicaNumber.
func TestBucketReplicaNumber(t *testing.T) {
	dir, authDir := t.TempDir(), t.TempDir()
	serve := func() (*fixture, func()) {
		eng, err := engine.Open(dir, &engine.Options{NumPartitions: 8, NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		store, err := auth.Open(authDir, &auth.Options{Argon2: cheapArgon2, ScramIterations: cheapScram, AdminUser: adminUser, AdminPassword: adminPass})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(httpapi.New(eng, &httpapi.Options{Auth: store}))
		return &fixture{t: t, eng: eng, srv: srv, users: store}, func() {
			srv.Close()
			if err := eng.Close(); err != nil {
				t.Error(err)
			}
		}
	}
	f, stop := serve()
	for bad, msg := range map[string]string{
		"4":    "Replica number larger than 3 is not supported.",
		"-1":   "The replica number cannot be negative.",
		"many": "The replica number must be specified and must be a non-negative integer.",
		"1.5":  "The replica number must be specified and must be a non-negative integer.",
	} {
		st, _, body := f.do("POST", "/pools/default/buckets", form, "name=r&ramQuotaMB=100&replicaNumber="+bad)
		errs, _ := jsonOf(t, body)["errors"].(map[string]any)
		if st != 400 || errs["replicaNumber"] != msg {
			t.Errorf("replicaNumber=%s: %d %s, want 400 with errors.replicaNumber %q", bad, st, body, msg)
		}
	}
	if st, _, body := f.do("GET", "/pools/default/buckets/r", "", ""); st != 404 {
		t.Fatalf("a refused create made the bucket: %d %s", st, body)
	}

	replicas := func(name string) any {
		t.Helper()
		st, _, body := f.do("GET", "/pools/default/buckets/"+name, "", "")
		if st != 200 {
			t.Fatalf("GET %s: %d %s", name, st, body)
		}
		return jsonOf(t, body)["replicaNumber"]
	}
	for name, param := range map[string]string{"r0": "&replicaNumber=0", "r3": "&replicaNumber=3", "plain": ""} {
		if st, _, body := f.do("POST", "/pools/default/buckets", form, "name="+name+"&ramQuotaMB=100"+param); st != 202 {
			t.Fatalf("create %s: %d %s", name, st, body)
		}
	}
	want := map[string]any{"r0": float64(0), "r3": float64(3), "plain": float64(1)}
	for name, n := range want {
		if got := replicas(name); got != n {
			t.Errorf("bucket %s: replicaNumber %v, want %v", name, got, n)
		}
	}
	// An update may repeat it, change it (a single node: no effect), or
	// leave it out (kept); out of range it is refused, changing nothing.
	if st, _, body := f.do("POST", "/pools/default/buckets/r3", form, "ramQuotaMB=100&replicaNumber=9&maxTTL=30"); st != 400 || !strings.Contains(body, "replicaNumber") {
		t.Errorf("update to 9: %d %s, want 400 naming replicaNumber", st, body)
	}
	if st, _, body := f.do("POST", "/pools/default/buckets/r3", form, "ramQuotaMB=100&maxTTL=30"); st != 200 || jsonOf(t, body)["replicaNumber"] != float64(3) {
		t.Errorf("update without replicaNumber: %d %s, want it kept (3)", st, body)
	}
	if st, _, body := f.do("POST", "/pools/default/buckets/r0", form, "ramQuotaMB=100&replicaNumber=2"); st != 200 || jsonOf(t, body)["replicaNumber"] != float64(2) {
		t.Errorf("update r0 to 2: %d %s", st, body)
	}
	want["r0"] = float64(2)
	stop()

	f, stop = serve()
	defer stop()
	for name, n := range want {
		if got := replicas(name); got != n {
			t.Errorf("after a restart, bucket %s: replicaNumber %v, want %v", name, got, n)
		}
	}
}
