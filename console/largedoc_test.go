package console_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Opening a large document (8 MiB: four million readings in one array, well
// under the 20 MiB value limit) leaves the console usable: the editor opens
// on it (showing it, or saying it is too large to show whole), and the
// page still answers clicks afterwards. A review found that the console
// pulled the whole value into the page, indented it to four million lines
// in the textarea, and the tab stopped answering for over a minute.
func TestConsoleLargeDocumentKeepsThePageResponsive(t *testing.T) {
	b := newBrowser(t)
	srv := newTestServer(t)
	big := "[" + strings.Repeat("1,", 4<<20) + "1]"
	if resp := srv.adminPut(t, "/default/docs/readings", "application/json", big); resp.StatusCode >= 300 {
		t.Fatalf("writing readings: %s", resp.Status)
	}
	if resp := srv.adminPut(t, "/default/docs/small", "application/json", `{"a":1}`); resp.StatusCode >= 300 {
		t.Fatalf("writing small: %s", resp.Status)
	}
	b.login(srv)
	b.click(`#nav a[href^="#/docs/"]`)
	b.click(`#doc-list tr[data-id="readings"] a`)
	// Generous: a hung tab never gets there; a working one does at once.
	ready := `(() => { const h = document.querySelector('#doc-editor h2'); return !!h && h.textContent.includes('Document readings'); })()`
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[bool](ready, chromedp.WithPollingTimeout(40*time.Second), chromedp.WithPollingInterval(100*time.Millisecond))); err != nil {
		t.Fatalf("the editor did not open on an 8 MiB document: %v", err)
	}
	// The page answers: another document opens.
	b.click(`#doc-list tr[data-id="small"] a`)
	b.waitText("#doc-editor h2", "Document small")
	b.waitValue("#doc-body", `"a": 1`)
}
