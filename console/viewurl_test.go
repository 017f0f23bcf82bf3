package console_test

import "testing"

// The query URL shown under the Views preview is the one the console sends:
// a design document's name is encoded as a path segment (a review found it
// was shown raw, "&" and "%" included, so copying it queried another path).
func TestConsoleViewQueryURLIsEncoded(t *testing.T) {
	b := newBrowser(t)
	srv := newTestServer(t)
	if resp := srv.adminPut(t, "/default/_design/dev_r%26d", "application/json", `{"views":{"v":{"map":"function (doc, meta) { emit(meta.id, null); }"}}}`); resp.StatusCode >= 300 {
		t.Fatalf("writing _design/dev_r&d: %s", resp.Status)
	}
	b.login(srv)
	b.click(`#nav a[href^="#/views/"]`)
	b.waitText("#ddoc-list", "_design/dev_r&d")
	b.click(`#ddoc-list a[data-ddoc="dev_r&d"]`)
	b.waitText("#ddoc-detail h2", "_design/dev_r&d")
	b.click("#q-run")
	b.waitText("#q-url", "GET /default/_design/dev_r%26d/_view/v?")
}
