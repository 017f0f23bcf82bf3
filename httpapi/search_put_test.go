package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// A new index's PUT through /api/index/{name} needs fts_admin on the
// bucket the service will create it in: the one its definition names as
// the service reads it (a JSON object's last "sourceName", as
// encoding/json reads it), or an alias's targets' bucket when it names
// none. An fts_admin of one bucket cannot slip an index into another by
// naming its own bucket first, and can create an alias over its own
// bucket's indexes without naming the bucket (as Couchbase's console
// writes alias definitions, with no sourceName).
func TestSearchPutChecksTheBucketTheIndexGoesTo(t *testing.T) {
	eng, do := searchFront(t, nil, []string{"default", "other"},
		map[string]string{"otheradmin": "fts_admin[other]", "admin": "fts_admin[default]"})
	two := `{"type":"fulltext-index","sourceName":"other","sourceName":"default"}`
	if status, body := do("otheradmin", http.MethodPut, "/api/index/sneaky", two); status != http.StatusForbidden {
		t.Errorf("fts_admin[other] PUT a definition whose last sourceName is default: %d %s, want 403", status, body)
	}
	b, err := eng.Bucket("default")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.SystemDoc("_search/sneaky"); err == nil {
		t.Errorf("fts_admin[other] created an index in bucket default")
	}
	if status, body := do("admin", http.MethodPut, "/api/index/idx", `{"type":"fulltext-index","sourceName":"default"}`); status != http.StatusOK {
		t.Fatalf("create index: %d %s", status, body)
	}
	alias := `{"type":"fulltext-alias","sourceType":"nil","params":{"targets":{"idx":{}}}}`
	if status, body := do("otheradmin", http.MethodPut, "/api/index/otheralias", alias); status != http.StatusForbidden {
		t.Errorf("fts_admin[other] created an alias over bucket default's index: %d %s, want 403", status, body)
	}
	if status, body := do("admin", http.MethodPut, "/api/index/myalias", alias); status != http.StatusOK {
		t.Fatalf("fts_admin[default] creating an alias over its bucket's index, naming no bucket: %d %s, want 200", status, body)
	}
	if _, err := b.DefaultCollection().Upsert(context.Background(), "a", []byte(`{"text":"fox"}`), nil); err != nil {
		t.Fatal(err)
	}
	if status, body := do("admin", http.MethodPost, "/api/index/myalias/query", `{"query":{"match":"fox"},"ctl":{"consistency":{"level":"at_plus"}}}`); status != http.StatusOK || !strings.Contains(body, `"total_hits":1`) {
		t.Errorf("query of the alias: %d %s", status, body)
	}
}

// A PUT replacing an index with the uuid of a definition replaced since
// (in the body, or as cbft's prevIndexUUID parameter) is refused with
// cbft's 400 and reason, and changes nothing; with the current uuid it
// replaces the index.
func TestSearchPutChecksThePrevIndexUUID(t *testing.T) {
	_, do := searchFront(t, nil, []string{"default"}, nil)
	uuidOf := func(body string) string {
		t.Helper()
		var m struct {
			UUID string `json:"uuid"`
		}
		if err := json.Unmarshal([]byte(body), &m); err != nil || m.UUID == "" {
			t.Fatalf("no uuid in %s", body)
		}
		return m.UUID
	}
	status, body := do("Administrator", http.MethodPut, "/api/index/idx", `{"sourceName":"default"}`)
	if status != http.StatusOK {
		t.Fatalf("create: %d %s", status, body)
	}
	first := uuidOf(body)
	status, body = do("Administrator", http.MethodPut, "/api/index/idx", fmt.Sprintf(`{"sourceName":"default","uuid":%q,"params":{"mapping":{"default_analyzer":"en"}}}`, first))
	if status != http.StatusOK {
		t.Fatalf("replace with the current uuid: %d %s", status, body)
	}
	second := uuidOf(body)
	for _, c := range []struct{ path, def string }{
		{"/api/index/idx", fmt.Sprintf(`{"sourceName":"default","uuid":%q}`, first)},
		{"/api/index/idx?prevIndexUUID=" + first, `{"sourceName":"default"}`},
		{"/api/bucket/default/scope/_default/index/idx?prevIndexUUID=" + first, `{}`},
	} {
		status, body := do("Administrator", http.MethodPut, c.path, c.def)
		if status != http.StatusBadRequest || !strings.Contains(strings.ToLower(body), "current index uuid") || !strings.Contains(strings.ToLower(body), "did not match input uuid") {
			t.Errorf("PUT %s %s naming the replaced uuid: %d %s, want 400 saying the current index uuid did not match", c.path, c.def, status, body)
		}
	}
	if status, body := do("Administrator", http.MethodGet, "/api/index/idx", ""); status != http.StatusOK || !strings.Contains(body, `"uuid":"`+second+`"`) {
		t.Errorf("after the refused PUTs: %d %s, want the definition of uuid %s", status, body, second)
	}
	if status, body := do("Administrator", http.MethodPut, "/api/index/idx?prevIndexUUID="+second, `{"sourceName":"default"}`); status != http.StatusOK {
		t.Errorf("PUT with prevIndexUUID the current uuid: %d %s", status, body)
	}
}
