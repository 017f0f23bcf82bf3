package console_test

import (
	"bytes"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// A binary value that is UTF-8 text beginning with a byte order mark (a
// file saved by a Windows editor, a CSV export) keeps its bytes when the
// user opens it in the console and saves it, say to give it an expiry: the
// editor shows the mark or does not offer to save the value. A review
// found that the editor's UTF-8 decoding dropped the mark silently, the
// value stayed editable, and Save wrote it back three bytes shorter.
func TestConsoleSavingABinaryValueKeepsItsByteOrderMark(t *testing.T) {
	b := newBrowser(t)
	srv := newTestServer(t)
	value := []byte("\xef\xbb\xbfname;score\nann;3\n")
	if resp := srv.adminPut(t, "/default/docs/export", "application/octet-stream", string(value)); resp.StatusCode >= 300 {
		t.Fatalf("writing export: %s", resp.Status)
	}
	b.login(srv)
	b.click(`#nav a[href^="#/docs/"]`)
	b.click(`#doc-list tr[data-id="export"] a`)
	b.waitText("#doc-editor h2", "Document export")
	b.waitText("#doc-status", "binary")
	if visible(b, "#doc-save") {
		// Give it an expiry of an hour, the text left as shown.
		b.set("#doc-keep-expiry", "false")
		b.set("#doc-expiry", "3600")
		b.click("#doc-save")
		saved := `(() => { const e = document.querySelector('#doc-status'); return !!e && e.textContent.includes('Saved'); })()`
		if _, err := chromedp.Run(b.ctx, chromedp.Poll[bool](saved, chromedp.WithPollingTimeout(15*time.Second), chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
			t.Fatalf("Save did not answer: %v; the status shows %q", err, b.text("#doc-status"))
		}
	}
	req, err := http.NewRequest(http.MethodGet, srv.url+"/default/docs/export", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(adminUser, adminPass)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	if !bytes.Equal(got, value) {
		t.Errorf("after Save in the console, export holds % x, want the bytes written, % x (the status said %q)", got, value, b.text("#doc-status"))
	}
}
