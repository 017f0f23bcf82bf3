package httpapi_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// PUT /{bucket}/_design/{ddoc} refuses a name that is not UTF-8 (sent
// percent-encoded as other bytes) with 400 and CouchDB's bad_request, and
// stores nothing; a review found it answered 201 and /metrics then failed.
// One stored before the check keeps its metrics, its ddoc label's invalid
// bytes replaced by U+FFFD as a JSON answer shows its id, and is deletable.
func TestDesignDocNameNotUTF8(t *testing.T) {
	f := newFixture(t)
	ddoc := `{"views":{"v":{"map":"function (doc, meta) { emit(meta.id, null); }"}}}`
	st, _, body := f.do("PUT", "/default/_design/x%FFy", "application/json", ddoc)
	var e struct{ Error, Reason string }
	if err := json.Unmarshal([]byte(body), &e); err != nil || st != 400 || e.Error != "bad_request" || !strings.Contains(e.Reason, "UTF-8") {
		t.Fatalf("PUT _design/x%%FFy: %d %s, want 400 bad_request saying UTF-8", st, body)
	}
	if st, _, body := f.do("GET", "/default/_design/x%FFy", "", ""); st != 404 {
		t.Fatalf("GET the refused _design/x%%FFy: %d %s, want 404", st, body)
	}
	if st, _, body := f.do("PUT", "/default/_design/x%C3%BFy", "application/json", ddoc); st != 201 {
		t.Fatalf("PUT _design/x%%C3%%BFy (UTF-8): %d %s", st, body)
	}

	// As a definition stored before the check: a cluster node applies what
	// the cluster holds without it.
	if _, err := f.views.PutDesignDocVersion(context.Background(), "default", "old\xff", []byte(ddoc), 1); err != nil {
		t.Fatal(err)
	}
	st, _, metrics := f.do("GET", "/metrics", "", "")
	if st != 200 {
		t.Fatalf("/metrics with a design document stored as _design/old\\xff: %d %.300s", st, metrics)
	}
	for _, want := range []string{`mayfly_view_rows{bucket="default",ddoc="_design/old` + "\ufffd" + `",view="v"}`, `mayfly_view_rows{bucket="default",ddoc="_design/xÿy",view="v"}`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if st, _, body := f.do("DELETE", "/default/_design/old%FF", "", ""); st != 200 {
		t.Fatalf("DELETE _design/old%%FF: %d %s", st, body)
	}
}
