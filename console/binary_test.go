package console_test

import (
	"io"
	"net/http"
	"testing"
)

// A binary document opened in the editor is shown as text, and saving
// stores what the box holds, as the page says: as a binary document again,
// not refused as invalid JSON.
func TestConsoleSavesABinaryDocument(t *testing.T) {
	b := newBrowser(t)
	srv := newTestServer(t)
	if resp := srv.adminPut(t, "/default/docs/blob", "application/octet-stream", "plain text v1"); resp.StatusCode >= 300 {
		t.Fatalf("writing blob: %s", resp.Status)
	}
	b.login(srv)
	b.click(`#nav a[href^="#/docs/"]`)
	b.click(`#doc-list tr[data-id="blob"] a`)
	b.waitText("#doc-editor h2", "Document blob")
	b.waitValue("#doc-body", "plain text v1")
	b.waitText("#doc-status", "saving stores what the box holds")
	b.set("#doc-body", "plain text v2")
	b.click("#doc-save")
	b.waitText("#doc-status", "Saved blob")
	req, err := http.NewRequest(http.MethodGet, srv.url+"/default/docs/blob", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(adminUser, adminPass)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if string(body) != "plain text v2" || resp.Header.Get("Content-Type") != "application/octet-stream" {
		t.Errorf("after saving, blob is %q (%s), want the binary document %q", body, resp.Header.Get("Content-Type"), "plain text v2")
	}
}
