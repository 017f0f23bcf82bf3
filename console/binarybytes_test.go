package console_test

import (
	"bytes"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// A binary document that is not UTF-8 text (an image, a msgpack or
// compressed value) keeps its bytes when the user opens it in the console
// and saves, say to give it an expiry: the console either writes back the
// bytes it read or does not offer to save what it cannot show. A review
// found that the editor decoded the value as UTF-8, replacing every invalid
// byte with U+FFFD, and Save wrote that text back over the value.
func TestConsoleSavingABinaryDocumentKeepsItsBytes(t *testing.T) {
	b := newBrowser(t)
	srv := newTestServer(t)
	value := []byte{0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0xff, 0xfe, 0x80, 0x81}
	if resp := srv.adminPut(t, "/default/docs/logo", "application/octet-stream", string(value)); resp.StatusCode >= 300 {
		t.Fatalf("writing logo: %s", resp.Status)
	}
	b.login(srv)
	b.click(`#nav a[href^="#/docs/"]`)
	b.click(`#doc-list tr[data-id="logo"] a`)
	b.waitText("#doc-editor h2", "Document logo")
	b.waitText("#doc-status", "binary")
	if visible(b, "#doc-save") {
		// Give it an expiry of an hour: the value is not touched.
		b.set("#doc-keep-expiry", "false")
		b.set("#doc-expiry", "3600")
		b.click("#doc-save")
		changed := `(() => { const e = document.querySelector('#doc-status'); return !!e && !e.textContent.includes('shown as text'); })()`
		if _, err := chromedp.Run(b.ctx, chromedp.Poll[bool](changed, chromedp.WithPollingTimeout(15*time.Second), chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
			t.Fatalf("Save did not answer: %v; the status shows %q", err, b.text("#doc-status"))
		}
	}
	req, err := http.NewRequest(http.MethodGet, srv.url+"/default/docs/logo", nil)
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
		t.Errorf("after Save in the console, logo holds % x, want the bytes written, % x (the status said %q)", got, value, b.text("#doc-status"))
	}
}
