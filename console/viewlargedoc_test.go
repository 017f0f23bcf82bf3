package console_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The Views page stays usable on a bucket holding a large document (8 MiB:
// four million readings in one array): its sample pane and a result
// preview with include_docs show the row (the document, or a word that it
// is too large to show whole) and the page still answers clicks. A review
// found that both drew the whole value, indented to four million lines,
// and the preview with include_docs left the tab hung.
func TestConsoleViewPreviewOfALargeDocument(t *testing.T) {
	b := newBrowser(t)
	srv := newTestServer(t)
	big := "[" + strings.Repeat("1,", 4<<20) + "1]"
	if resp := srv.adminPut(t, "/default/docs/readings", "application/json", big); resp.StatusCode >= 300 {
		t.Fatalf("writing readings: %s", resp.Status)
	}
	if resp := srv.adminPut(t, "/default/_design/dev_r", "application/json", `{"views":{"v":{"map":"function (doc, meta) { emit(meta.id, null); }"}}}`); resp.StatusCode >= 300 {
		t.Fatalf("writing _design/dev_r: %s", resp.Status)
	}
	b.login(srv)
	b.click(`#nav a[href^="#/views/"]`)
	b.waitText("#ddoc-list", "_design/dev_r")
	b.click(`#ddoc-list a[data-ddoc="dev_r"]`)
	b.waitText("#ddoc-detail h2", "_design/dev_r")
	b.set("#q-include_docs", "true")
	b.click("#q-run")
	// Generous: a hung tab never gets there; a working one does at once.
	done := `(() => { const e = document.querySelector('#query-status'); return !!e && e.textContent.includes('1 row'); })()`
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[bool](done, chromedp.WithPollingTimeout(40*time.Second), chromedp.WithPollingInterval(100*time.Millisecond))); err != nil {
		t.Fatalf("the preview with include_docs did not show the row of an 8 MiB document: %v", err)
	}
	// The page answers: the Documents page opens and lists it.
	b.click(`#nav a[href^="#/docs/"]`)
	b.waitText("#doc-list", "readings")
}
