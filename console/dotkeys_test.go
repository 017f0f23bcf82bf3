package console_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// Documents whose keys are "." and ".." (legal keys: _bulk and the
// memcached port write them) open in the console's editor with their value
// and can be deleted from it, like any listed document; a review found that
// the browser read /{b}/docs/.. as the path /{b}/, so the editor showed "no
// such resource" for a document the list had just shown.
func TestConsoleOpensDotKeys(t *testing.T) {
	b := newBrowser(t)
	srv := newTestServer(t)
	bulk := `{"op":"upsert","id":".","doc":{"dots":1}}` + "\n" + `{"op":"upsert","id":"..","doc":{"dots":2}}`
	if resp := srv.adminDo(t, http.MethodPost, "/default/_bulk", "application/x-ndjson", bulk); resp.StatusCode != http.StatusOK {
		t.Fatalf("writing . and ..: %s", resp.Status)
	}
	b.login(srv)
	b.click(`#nav a[href^="#/docs/"]`)
	for i, key := range []string{".", ".."} {
		row := fmt.Sprintf(`#doc-list tr[data-id=%q]`, key)
		b.waitText(row, key)
		b.click(row + " a")
		b.waitText("#doc-editor h2", "Document "+key)
		b.waitValue("#doc-body", fmt.Sprintf(`"dots": %d`, i+1))
		b.click("#doc-delete")
		b.click("#doc-delete") // "Really delete?"
		b.waitText("#doc-status", "Deleted "+key)
	}
	// The server agrees: both are gone.
	for _, key := range []string{".", ".."} {
		body := fmt.Sprintf(`{"keys":[%q]}`, key)
		req, err := http.NewRequest(http.MethodPost, srv.url+"/default/_all_docs", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth(adminUser, adminPass)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(got), `"error":"not_found"`) && !strings.Contains(string(got), `"deleted":true`) {
			t.Errorf("after Delete in the console, %q is still there: %s", key, got)
		}
	}
}
