package console_test

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/console"
)

func get(t *testing.T, h http.Handler, method, path string) *http.Response {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec.Result()
}

// TestHandler: the page and its files are served with a strict
// Content-Security-Policy; / and /ui redirect to /ui/; anything else is 404
// or 405.
func TestHandler(t *testing.T) {
	h := console.Handler()
	for _, c := range []struct{ path, ctype, has string }{
		{"/ui/", "text/html", `<script type="module" src="app.js">`},
		{"/ui/app.js", "text/javascript", "import"},
		{"/ui/app.css", "text/css", "body"},
	} {
		resp := get(t, h, "GET", c.path)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), c.ctype) || !strings.Contains(string(body), c.has) {
			t.Errorf("GET %s: %d %s %.80q", c.path, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
		csp := resp.Header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("GET %s: Content-Security-Policy %q", c.path, csp)
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: no X-Content-Type-Options: nosniff", c.path)
		}
	}
	for _, p := range []string{"/", "/ui"} {
		if resp := get(t, h, "GET", p); resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/ui/" {
			t.Errorf("GET %s: %d to %q, want a redirect to /ui/", p, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	for _, p := range []string{"/ui/nope.js", "/ui/x/app.js", "/other"} {
		if resp := get(t, h, "GET", p); resp.StatusCode != 404 {
			t.Errorf("GET %s: %d, want 404", p, resp.StatusCode)
		}
	}
	if resp := get(t, h, "POST", "/ui/"); resp.StatusCode != 405 {
		t.Errorf("POST /ui/: %d, want 405", resp.StatusCode)
	}
	if resp := get(t, h, "HEAD", "/ui/app.js"); resp.StatusCode != 200 {
		t.Errorf("HEAD /ui/app.js: %d", resp.StatusCode)
	}
}

// TestFilesHoldTogether reads the console's sources: every file the page
// and the modules load exists and is served, and no page builds HTML from
// strings or runs inline code, which the Content-Security-Policy would
// refuse or which would let a document's content run as script.
func TestFilesHoldTogether(t *testing.T) {
	h := console.Handler()
	dir := "ui"
	refs := regexp.MustCompile(`(?:src|href)="([^"#:]+)"|from '\./([^']+)'|import\('/ui/([^']+)'\)`)
	forbidden := regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function\(|style="|<script>|\son[a-z]+="`)
	n := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		n++
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if m := forbidden.FindString(string(src)); m != "" {
			t.Errorf("%s uses %q", path, m)
		}
		for _, m := range refs.FindAllStringSubmatch(string(src), -1) {
			name := m[1] + m[2] + m[3]
			if resp := get(t, h, "GET", "/ui/"+name); resp.StatusCode != 200 {
				t.Errorf("%s loads %s, which is answered %d", path, name, resp.StatusCode)
			}
		}
		return nil
	})
	if err != nil || n < 5 {
		t.Fatalf("reading %s: %v (%d files)", dir, err, n)
	}
}
