// Package console is Mayfly's web console: plain HTML, CSS and JavaScript
// embedded in the binary, served at /ui/. It holds no server logic: every
// page is built in the browser from the public HTTP API (package httpapi),
// called with the HTTP Basic credentials the user logs in with.
package console

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

// The console's files: flat, one level under ui/ (see Handler).
//
//go:embed ui
var files embed.FS

// Prefix is the path the console is served under.
const Prefix = "/ui/"

// contentSecurityPolicy allows scripts, styles and API calls from this
// origin only: no inline code, no framing. The pages use no inline script or
// style, so it costs them nothing.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// setHeaders sets the headers of every answer.
func setHeaders(h http.Header) {
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	// The files change with the binary, which gives them no modification
	// time: revalidate every time.
	h.Set("Cache-Control", "no-cache")
}

// Handler returns the console's http.Handler. It answers GET and HEAD of
// Prefix (the console's page) and of Prefix+NAME (its scripts and styles;
// the files are flat, so NAME is one path segment), and redirects / and /ui
// to Prefix; anything else is 404. It needs no authentication: the files
// hold no data, and the pages ask for credentials before calling the API.
func Handler() http.Handler {
	sub, err := fs.Sub(files, "ui")
	if err != nil {
		panic(err) // the embedded tree always has ui/
	}
	static := http.StripPrefix(Prefix, http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		setHeaders(w.Header())
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		switch p := r.URL.Path; {
		case p == "/" || p == strings.TrimSuffix(Prefix, "/"):
			http.Redirect(w, r, Prefix, http.StatusFound)
		case strings.HasPrefix(p, Prefix) && !strings.Contains(p[len(Prefix):], "/"):
			static.ServeHTTP(w, r)
		default:
			http.NotFound(w, r)
		}
	})
}
