package console_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestConsole goes through the console as a user would, in a real browser:
// log in, create a bucket, load documents, write a design document with a
// syntax error (shown in place) and then a good one with _sum, preview its
// results, let a document expire (its include_docs row shows doc: null,
// marked expired; the sum still counts it), run the pager from the console,
// and see the sum corrected, the run on the expiry page and the items on the
// stats page. Every assertion reads what the page shows.
func TestConsole(t *testing.T) {
	b := newBrowser(t) // first: without a browser the test skips at once
	srv := newTestServer(t)

	// Log in: a wrong password is refused on the form, the right one opens
	// the bucket list.
	b.open(srv.url + "/")
	b.waitText("#main h1", "Log in")
	b.set("#login-password", "wrong")
	b.click("#login-submit")
	b.waitText("#login-status", "Wrong user name or password")
	b.screenshot("login")
	b.set("#login-password", adminPass)
	b.click("#login-submit")
	b.waitText("#bucket-list", "default")
	b.screenshot("buckets")

	// Create a bucket.
	b.set("#new-bucket-name", "travel")
	b.click("#new-bucket-create")
	b.waitText("#new-bucket-status", "Created bucket travel")
	b.waitText(`tr[data-bucket="travel"]`, "couchbase")

	// Load documents through the bulk box; a bad line fails alone.
	b.click(`tr[data-bucket="travel"] a`)
	b.waitText("#main h1", "Documents in travel")
	b.set("#bulk-text", strings.Join([]string{
		`{"id":"oslo","doc":{"type":"city","pop":7}}`,
		`{"id":"rome","doc":{"type":"city","pop":30},"expiry":60}`,
		`{"id":"lima","doc":{"type":"city","pop":11}}`,
		`{"id":"bergen","doc":{"type":"city","pop":3},"expiry":7200}`,
		`{"id":"broken","doc":{"type":`,
	}, "\n"))
	b.click("#bulk-load")
	b.waitText("#bulk-result", "4 written, 1 failed")
	b.waitText("#doc-list", "rome")
	if got := b.text(`#doc-list tr[data-id="rome"] .countdown`); !strings.HasPrefix(got, "in ") || !strings.Contains(got, "s") {
		t.Errorf("rome expires in 60 s: its countdown shows %q", got)
	}
	if got := b.text(`#doc-list tr[data-id="oslo"] .countdown`); got != "never" {
		t.Errorf("oslo never expires: its countdown shows %q", got)
	}
	if got := b.text(`#doc-list tr[data-id="bergen"] .countdown`); !strings.HasPrefix(got, "in 1h 59m") && !strings.HasPrefix(got, "in 2h") {
		t.Errorf("bergen expires in 2 h: its countdown shows %q", got)
	}
	b.screenshot("documents")

	// A design document: a syntax error is shown under the map editor.
	b.newDevView("cities", "by_type")
	b.set("#map-editor", "function (doc, meta) {\n  emit(doc.type, doc.pop);\n  if (\n}")
	b.set("#reduce-editor", "_sum")
	b.click("#view-save")
	b.waitText("#map-error", "SyntaxError")
	if got := b.text("#map-error"); !strings.Contains(got, "line") {
		t.Errorf("the compile error should say where: %q", got)
	}
	b.screenshot("compile-error")

	// The good one saves, and the error goes away.
	b.set("#map-editor", "function (doc, meta) {\n  emit(doc.type, doc.pop);\n}")
	b.click("#view-save")
	b.waitText("#view-status", "Saved _design/dev_cities")
	if got := b.text("#map-error"); got != "" {
		t.Errorf("the compile error is still shown after a good save: %q", got)
	}

	// Preview: the sum, then the rows with their documents.
	b.click("#q-run")
	b.waitText("#query-status", "1 row")
	b.waitText("#results td.value", "51")
	b.set("#q-reduce", "false")
	b.set("#q-include_docs", "true")
	b.click("#q-run")
	b.waitText("#query-status", "4 rows")
	b.waitText(`#results tr[data-id="rome"] td.doc`, `"pop": 30`)

	// Rome expires: its row stays, with doc: null marked expired, and the
	// sum still counts it until the pager purges it.
	srv.clk.Advance(120)
	b.click("#q-run")
	b.waitText(`#results tr[data-id="rome"] td.doc`, "expired, not purged yet")
	b.waitText(`#results tr[data-id="rome"] td.doc`, "doc: null")
	if got := b.text(`#results tr[data-id="oslo"] td.doc`); strings.Contains(got, "expired") {
		t.Errorf("oslo's row is marked expired: %q", got)
	}
	b.screenshot("expired-row")
	b.set("#q-reduce", "")
	b.set("#q-include_docs", "false")
	b.click("#q-run")
	b.waitText("#query-status", "1 row")
	b.waitText("#results td.value", "51")
	// expired=exclude answers exactly before the pager runs: the sum
	// without rome's 30.
	b.set("#q-expired", "exclude")
	b.click("#q-run")
	b.waitText("#q-url", "expired=exclude")
	b.waitText("#results td.value", "21")
	b.set("#q-expired", "")

	// Run the pager from the bucket list.
	b.click(`#nav a[href="#/buckets"]`)
	b.waitText(`tr[data-bucket="travel"]`, "travel")
	b.click(`tr[data-bucket="travel"] .run-pager`)
	b.waitText(`tr[data-bucket="travel"] .status`, "purged 1")
	b.waitText(`tr[data-bucket="travel"] .last-run`, "purged 1")
	if got := b.text(`tr[data-bucket="travel"] .items`); got != "3" {
		t.Errorf("travel holds 3 items after the pager purged rome: the list shows %q", got)
	}

	// Back to the view, which the console remembers: the sum is corrected.
	b.click(`#nav a[href^="#/views/"]`)
	b.waitText("#ddoc-detail h2", "_design/dev_cities")
	b.click("#q-run")
	b.waitText("#query-status", "1 row")
	b.waitText("#results td.value", "21")
	b.set("#q-reduce", "false")
	b.set("#q-include_docs", "true")
	b.click("#q-run")
	b.waitText("#query-status", "3 rows")
	if got := b.text("#results"); strings.Contains(got, "rome") {
		t.Errorf("rome's row is still there after the pager purged it: %q", got)
	}

	// Publish to production; publishing again asks before replacing it.
	b.click("#ddoc-publish")
	b.waitText("#ddoc-status", "Published as _design/cities")
	b.waitText("#ddoc-list", "_design/cities")
	b.click("#ddoc-publish")
	b.waitText("#ddoc-publish", "Replace _design/cities?")
	b.click("#ddoc-publish")
	b.waitText("#ddoc-status", "Published as _design/cities")

	// The production design document is read-only, and answers the same.
	b.click(`.ddoc-link[data-ddoc="cities"]`)
	b.waitText("#ddoc-detail", "read-only here")
	if !eval[bool](b, `document.querySelector('#map-editor').readOnly && document.querySelector('#view-save').disabled`) {
		t.Error("the production design document's editor can be edited")
	}
	b.click("#q-run")
	b.waitText("#results td.value", "21")
	b.click("#ddoc-copy-dev")
	b.waitText("#ddoc-copy-dev", "Replace _design/dev_cities?")

	// The expiry page: bergen expires within hour 2 ahead, and the pager
	// run purged one document.
	b.click(`#nav a[href^="#/expiry/"]`)
	b.waitText("#main h1", "Expiry in travel")
	b.waitText("#runs-table td.purged", "1")
	b.waitText("#expiry-summary", "1 expiring in the next 24 hours")
	if got := b.text(`#expiry-chart g.bar[data-value="1"] title`); !strings.Contains(got, "1 documents") {
		t.Errorf("the forecast chart has no bar for bergen: %q", got)
	}
	if got := b.text(`#runs-chart g.bar[data-value="1"] title`); !strings.Contains(got, "purged 1") {
		t.Errorf("the pager-runs chart has no bar for the run: %q", got)
	}
	b.screenshot("expiry")

	// Stats: the live charts and the current figures.
	b.click(`#nav a[href^="#/stats/"]`)
	b.waitText("#stats-charts", "Items")
	b.waitText(`#stats-table tr[data-stat="curr_items"]`, "3")
	b.waitText(`#stats-table tr[data-stat="ep_expired_pager"]`, "1")
	// Memory, as Couchbase's console charts it: what the bucket uses and
	// how much of it is resident (nothing ejected here).
	b.waitText(`#stats-charts figure[data-stat="mem_used"] figcaption`, "Memory used")
	b.waitText(`#stats-charts figure[data-stat="vb_active_perc_mem_resident"] .latest`, "100")
	b.screenshot("stats")
}

// TestConsoleDocumentsAndSettings edits bucket settings, and creates,
// edits and deletes a document in the browser: the bucket's maxTTL caps the
// new document's expiration, a number beyond 2^53 survives the editor, a
// write that lost a race is refused with the API's reason, and logging out
// returns to the log-in form.
func TestConsoleDocumentsAndSettings(t *testing.T) {
	b := newBrowser(t) // first: without a browser the test skips at once
	srv := newTestServer(t)
	b.login(srv)

	// Settings: maxTTL and the pager's interval, shown again after saving.
	row := `tr[data-bucket="default"]`
	b.set(row+" .max-ttl", "3600")
	b.set(row+" .pager-stime", "600")
	b.click(row + " .save")
	b.waitText(row+" .status", "Saved maxTTL and pager interval")
	b.screenshot("settings")
	b.waitText(row+" .pager-info", "next run in 10m", "next run in 9m")
	if got := b.value(row + " .max-ttl"); got != "3600" {
		t.Errorf("maxTTL shows %q after saving 3600", got)
	}
	if got := b.value(row + " .pager-stime"); got != "600" {
		t.Errorf("the pager interval shows %q after saving 600", got)
	}

	// A new document without an expiry gets the bucket's maxTTL.
	b.click(`#nav a[href^="#/docs/"]`)
	b.waitText("#main h1", "Documents in default")
	b.click("#doc-new")
	b.set("#doc-key", "big")
	b.set("#doc-body", `{"n":12345678901234567890,"s":"a,b:{c}"}`)
	b.click("#doc-save")
	b.waitText("#doc-status", "Saved big")
	b.waitText(`#doc-list tr[data-id="big"] .countdown`, "in 1h 0m", "in 59m")

	// Opened again, the value is as stored, number and string intact.
	b.click(`#doc-list tr[data-id="big"] a`)
	b.waitText("#doc-editor h2", "Document big")
	b.waitText("#doc-expiration", "in 1h 0m", "in 59m")
	b.screenshot("document")
	if got := b.value("#doc-body"); !strings.Contains(got, `"n": 12345678901234567890`) || !strings.Contains(got, `"s": "a,b:{c}"`) {
		t.Errorf("the editor changed the document: %q", got)
	}

	// A write behind the console's back: its save is refused (CAS), and
	// says why.
	if resp := srv.adminPut(t, "/default/docs/big", "application/json", `{"n":1}`); resp.StatusCode != http.StatusOK {
		t.Fatalf("writing big behind the console: %s", resp.Status)
	}
	b.set("#doc-body", `{"n":2}`)
	b.click("#doc-save")
	b.waitText("#doc-status", "changed since you opened it")

	// Reopened, it shows the other write; edited and saved, it keeps its
	// expiration.
	b.click(`#doc-list tr[data-id="big"] a`)
	b.waitValue("#doc-body", `"n": 1`)
	b.set("#doc-body", `{"n":3}`)
	b.click("#doc-save")
	b.waitText("#doc-status", "Saved big")
	b.waitText(`#doc-list tr[data-id="big"] .countdown`, "in 1h 0m", "in 59m")

	// A map function that throws on it: the view editor says so, naming
	// the document, where the rows alone would only be missing.
	b.newDevView("errs", "deep")
	b.set("#map-editor", "function (doc, meta) {\n  emit(doc.a.b, null);\n}")
	b.click("#view-save")
	b.waitText("#view-status", "Saved _design/dev_errs")
	b.click("#q-run")
	b.waitText("#query-status", "0 rows")
	b.waitText("#view-info", "1 map error")
	b.waitText("#view-info .recent-errors", "big: TypeError")
	b.screenshot("map-error")

	// Deleted, after confirming.
	b.click(`#nav a[href^="#/docs/"]`)
	b.click(`#doc-list tr[data-id="big"] a`)
	b.waitText("#doc-editor h2", "Document big")
	b.click("#doc-delete")
	b.waitText("#doc-delete", "Really delete?")
	b.click("#doc-delete")
	b.waitText("#doc-editor", "Deleted big")
	b.waitText("#doc-list", "No documents here")

	b.click("#logout")
	b.waitText("#main h1", "Log in")
}

// TestConsoleHelpers runs the console's own pure functions in the browser:
// JSON indented without changing numbers or strings, and the bulk box's
// lines completed without re-encoding them.
func TestConsoleHelpers(t *testing.T) {
	b := newBrowser(t) // first: without a browser the test skips at once
	srv := newTestServer(t)
	b.open(srv.url + "/ui/")
	b.waitText("#main h1", "Log in")

	got := eval[string](b, `import('/ui/dom.js').then((m) => m.pretty('{"a":12345678901234567890,"b":[],"c":{"d":"x,\\"y\\":[1]"},"e":[1,{}]}'))`)
	want := "{\n  \"a\": 12345678901234567890,\n  \"b\": [],\n  \"c\": {\n    \"d\": \"x,\\\"y\\\":[1]\"\n  },\n  \"e\": [\n    1,\n    {}\n  ]\n}"
	if got != want {
		t.Errorf("pretty:\n%s\nwant\n%s", got, want)
	}

	got = eval[string](b, `import('/ui/docs.js').then((m) => m.bulkBody(' {"id":"a","doc":{"n":12345678901234567890}}\n\n{"op":"delete","id":"b"}\n{"id":"c","collection":"s.c","doc":1}\nnot json\n{}', 'inv.items'))`)
	want = strings.Join([]string{
		`{"op":"upsert","collection":"inv.items","id":"a","doc":{"n":12345678901234567890}}`,
		`{"collection":"inv.items","op":"delete","id":"b"}`,
		`{"op":"upsert","id":"c","collection":"s.c","doc":1}`,
		`not json`,
		`{}`,
	}, "\n")
	if got != want {
		t.Errorf("bulkBody:\n%s\nwant\n%s", got, want)
	}
}

// TestConsoleReader logs in as a user who may only read bucket default: the
// console shows that bucket alone, without the buttons whose action the
// user's roles do not allow (Save, Run pager now, Delete, Create bucket, New
// document, the bulk box, a document's Save and Delete), and the pages it
// may read still work.
func TestConsoleReader(t *testing.T) {
	b := newBrowser(t)
	srv := newTestServer(t)
	if resp := srv.adminPut(t, "/settings/rbac/users/local/reader", "application/x-www-form-urlencoded", "password=reader-pw&roles=data_reader[default],views_reader[default]"); resp.StatusCode != http.StatusOK {
		t.Fatalf("creating user reader: %s", resp.Status)
	}
	if resp := srv.adminPut(t, "/default/docs/k1", "application/json", `{"a":1}`); resp.StatusCode >= 300 {
		t.Fatalf("writing k1: %s", resp.Status)
	}
	if resp := srv.adminPut(t, "/default/_design/dev_r", "application/json", `{"views":{"v":{"map":"function (doc, meta) { emit(meta.id, null); }"}}}`); resp.StatusCode >= 300 {
		t.Fatalf("writing _design/dev_r: %s", resp.Status)
	}

	b.loginAs(srv, "reader", "reader-pw")
	b.waitText("#who", "reader")

	row := `tr[data-bucket="default"]`
	b.waitText(row+" .actions", "read-only")
	for _, sel := range []string{row + " .save", row + " .run-pager", row + " .delete-bucket", "#new-bucket", "#new-bucket-create"} {
		if visible(b, sel) {
			t.Errorf("a reader is shown %s", sel)
		}
	}
	if !eval[bool](b, `document.querySelector('tr[data-bucket="default"] .max-ttl').readOnly`) {
		t.Error("a reader may edit maxTTL")
	}
	b.screenshot("reader-buckets")

	// Documents it may read, not write.
	b.click(`#nav a[href^="#/docs/"]`)
	b.waitText("#doc-list", "k1")
	for _, sel := range []string{"#doc-new", "#bulk-card", "#bulk-load"} {
		if visible(b, sel) {
			t.Errorf("a reader is shown %s", sel)
		}
	}
	b.click(`#doc-list tr[data-id="k1"] a`)
	b.waitText("#doc-editor h2", "Document k1")
	b.waitValue("#doc-body", `"a": 1`)
	for _, sel := range []string{"#doc-save", "#doc-delete"} {
		if n := count(b, sel); n != 0 {
			t.Errorf("a reader is shown %s on a document", sel)
		}
	}

	// The expiry page without its Run pager now.
	b.click(`#nav a[href^="#/expiry/"]`)
	b.waitText("#expiry-summary", "expired, not purged yet")
	if n := count(b, "#expiry-run-pager"); n != 0 {
		t.Error("a reader is shown Run pager now on the expiry page")
	}

	// Views it may read, not change: no new design document, no publish,
	// delete or save, and the editor says why it is read-only.
	b.click(`#nav a[href^="#/views/"]`)
	b.waitText("#ddoc-list", "_design/dev_r")
	b.click(`#ddoc-list a[data-ddoc="dev_r"]`)
	b.waitText("#view-read-only", "Read-only: your roles do not let you change the views of default: that needs views_admin[default]")
	for _, sel := range []string{"#ddoc-create", "#ddoc-publish", "#ddoc-delete", "#view-add", "#view-save", "#view-delete"} {
		if visible(b, sel) {
			t.Errorf("a views reader is shown %s", sel)
		}
	}
	if !eval[bool](b, `document.querySelector('#map-editor').readOnly`) {
		t.Error("a views reader may edit the map function")
	}
	b.click("#q-run")
	b.waitText("#query-status", "1 row")

	// Stats it may read; the request rate needs /metrics, which it may not.
	b.click(`#nav a[href^="#/stats/"]`)
	b.waitText(`#stats-table tr[data-stat="curr_items"]`, "1")
	if got := b.text("#stats-charts"); strings.Contains(got, "HTTP requests") {
		t.Errorf("a user who may not read /metrics is shown the request rate: %q", got)
	}
}

// A user who may not read a bucket's documents is told so in words on the
// Documents page, with the role that would allow it, not the API's
// permission string.
func TestConsoleNoDocumentRead(t *testing.T) {
	b := newBrowser(t)
	srv := newTestServer(t)
	if resp := srv.adminPut(t, "/settings/rbac/users/local/viewer", "application/x-www-form-urlencoded", "password=viewer-pw&roles=views_reader[default]"); resp.StatusCode != http.StatusOK {
		t.Fatalf("creating user viewer: %s", resp.Status)
	}
	b.loginAs(srv, "viewer", "viewer-pw")
	b.click(`#nav a[href^="#/docs/"]`)
	b.waitText("#doc-list-status", "Your roles do not let you read documents in default: that needs data_reader[default]")
	if got := b.text("#main"); strings.Contains(got, "lacks") || strings.Contains(got, "!read") {
		t.Errorf("the page shows the raw permission: %q", got)
	}
	if visible(b, "#doc-new") || visible(b, "#bulk-card") {
		t.Error("a user who may not write documents is shown New document or the bulk box")
	}
	b.screenshot("no-read")
}

// count is how many elements sel selects.
func count(b *browser, sel string) int {
	b.t.Helper()
	return eval[int](b, fmt.Sprintf(`document.querySelectorAll(%q).length`, sel))
}

// visible says whether sel selects an element that is rendered.
func visible(b *browser, sel string) bool {
	b.t.Helper()
	return eval[bool](b, fmt.Sprintf(`(() => { const e = document.querySelector(%q); return !!e && e.getClientRects().length > 0; })()`, sel))
}
