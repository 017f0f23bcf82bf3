package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/httpapi"
	"github.com/mayflydb/mayfly/internal/racebuild"
)

// TestAllDocsDuringWarmup asks for _all_docs while the bucket's warm-up is
// held after its first document, and lets the warm-up go once the request
// has reached the server: the answer counts in total_rows every document
// of the bucket, as it lists them. (total_rows was read before the listing
// waited for the warm-up, and a keys query did not wait at all: on the old
// code total_rows was whatever had loaded by then, 70 to 1,478 of 20,000 in
// four runs, beside 20,000 rows.)
func TestAllDocsDuringWarmup(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	eng, err := engine.Open(dir, &engine.Options{NumPartitions: 8, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := eng.CreateBucket(ctx, engine.DefaultBucketSettings("default"))
	if err != nil {
		t.Fatal(err)
	}
	// A quarter under the race detector (make test runs it whole without).
	n := racebuild.Scale(20000)
	for i := range n {
		if _, err := b.DefaultCollection().Upsert(ctx, fmt.Sprintf("k%03d", i), []byte(`{}`), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}

	for _, q := range []string{`?keys=["k001","k150"]`, "?limit=100000"} {
		t.Run(q, func(t *testing.T) {
			gate, held := make(chan struct{}), make(chan struct{})
			var hold, release sync.Once
			open := func() { release.Do(func() { close(gate) }) }
			eng, err := engine.Open(dir, &engine.Options{NumPartitions: 8, NoSync: true, BackgroundWarmup: true,
				WarmupHook: func(string, int64) { hold.Do(func() { close(held); <-gate }) }})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				open()
				if err := eng.Close(); err != nil {
					t.Error(err)
				}
			}()
			store, err := auth.Open(t.TempDir(), &auth.Options{Argon2: cheapArgon2, ScramIterations: cheapScram, AdminUser: adminUser, AdminPassword: adminPass})
			if err != nil {
				t.Fatal(err)
			}
			entered := make(chan struct{})
			var enter sync.Once
			h := httpapi.New(eng, &httpapi.Options{Auth: store})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				enter.Do(func() { close(entered) })
				h.ServeHTTP(w, r)
			}))
			defer srv.Close()
			f := &fixture{t: t, eng: eng, srv: srv, users: store}
			<-held // the warm-up holds: one document loaded of n

			type answer struct {
				status int
				body   string
			}
			got := make(chan answer, 1)
			go func() {
				st, _, body := f.do("GET", "/default/_all_docs"+q, "", "")
				got <- answer{st, body}
			}()
			<-entered // asked during the warm-up
			open()
			a := <-got
			var page struct {
				Total int               `json:"total_rows"`
				Rows  []json.RawMessage `json:"rows"`
			}
			if err := json.Unmarshal([]byte(a.body), &page); err != nil || a.status != 200 {
				t.Fatalf("%d %v %.300s", a.status, err, a.body)
			}
			want := n
			if q != "?limit=100000" {
				want = 2
			}
			if page.Total != n || len(page.Rows) != want {
				t.Fatalf("asked during the warm-up: total_rows %d and %d rows, want total_rows %d and %d rows", page.Total, len(page.Rows), n, want)
			}
		})
	}
}
