package console_test

import (
	"net/http"
	"testing"
)

// Editing a document in the console keeps the flags it was written with
// (an SDK stores its data format there: 0x02000006 is Couchbase's "JSON"),
// as it keeps the expiration; a review found that saving sent no flags and
// reset them to 0.
func TestConsoleEditKeepsDocumentFlags(t *testing.T) {
	b := newBrowser(t)
	srv := newTestServer(t)
	const flags = "33554438" // 0x02000006
	if resp := srv.adminDo(t, http.MethodPut, "/default/docs/sdk?flags="+flags+"&expiry=3600", "application/json", `{"a":1}`); resp.StatusCode >= 300 {
		t.Fatalf("writing sdk: %s", resp.Status)
	}
	b.login(srv)
	b.click(`#nav a[href^="#/docs/"]`)
	b.waitText(`#doc-list tr[data-id="sdk"]`, flags)
	b.click(`#doc-list tr[data-id="sdk"] a`)
	b.waitValue("#doc-body", `"a": 1`)
	b.set("#doc-body", `{"a":2}`)
	b.click("#doc-save")
	b.waitText("#doc-status", "Saved sdk")

	req, err := http.NewRequest(http.MethodGet, srv.url+"/default/docs/sdk", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(adminUser, adminPass)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("X-Mayfly-Flags"); got != flags {
		t.Errorf("after an edit in the console, sdk's flags are %s, want %s as written", got, flags)
	}
	if got := resp.Header.Get("X-Mayfly-Expiration"); got != "1700003600" {
		t.Errorf("after an edit in the console, sdk's expiration is %s, want 1700003600 as written", got)
	}
	// The list the console redraws after the save shows them too.
	b.waitText(`#doc-list tr[data-id="sdk"]`, flags)
}
