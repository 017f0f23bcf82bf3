package console_test

import (
	"net/http"
	"testing"
)

// Logging out forgets, with the credentials, the bucket, design document
// and view the console kept for the tab (a review found the names stayed in
// sessionStorage for the next user of the tab to see).
func TestConsoleLogoutForgetsChosenNames(t *testing.T) {
	b := newBrowser(t)
	srv := newTestServer(t)
	if resp := srv.adminDo(t, http.MethodPut, "/default/_design/dev_secret", "application/json", `{"views":{"v":{"map":"function (doc, meta) { emit(meta.id, null); }"}}}`); resp.StatusCode >= 300 {
		t.Fatalf("writing _design/dev_secret: %s", resp.Status)
	}
	b.login(srv)
	b.click(`#nav a[href^="#/views/"]`)
	b.click(`#ddoc-list a[data-ddoc="dev_secret"]`)
	b.waitText("#ddoc-detail h2", "_design/dev_secret")
	if n := eval[int](b, `Object.keys(sessionStorage).filter((k) => k.startsWith('mayfly.')).length`); n < 3 {
		t.Fatalf("before logout the console keeps %d names in sessionStorage, want the credentials and the choices", n)
	}
	b.click("#logout")
	b.waitText("main", "Password")
	if left := eval[[]string](b, `Object.keys(sessionStorage).filter((k) => k.startsWith('mayfly.'))`); len(left) != 0 {
		t.Errorf("after logout sessionStorage still holds %v", left)
	}
}
