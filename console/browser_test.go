package console_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/console"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/httpapi"
	"github.com/mayflydb/mayfly/internal/logtest"
	"github.com/mayflydb/mayfly/pager"
	"github.com/mayflydb/mayfly/views"
)

// The browser tests drive a headless Chromium (Debian's package chromium;
// `make tools` installs it) through the console against a real server. When
// no browser is found, and none can be installed (apt-get as root), they
// skip, saying so. MAYFLY_CHROMIUM names a browser binary to use instead;
// MAYFLY_CONSOLE_SHOTS names a directory to write a screenshot of each page
// to.

// browserTimeout bounds one test's whole browser session.
const browserTimeout = 90 * time.Second

// chromiumPath finds a Chromium or Chrome binary, installing Debian's
// chromium when none is found and the test runs as root where apt-get is.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("MAYFLY_CHROMIUM"); p != "" {
		return p
	}
	find := func() string {
		for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
			if p, err := exec.LookPath(name); err == nil {
				return p
			}
		}
		return ""
	}
	if p := find(); p != "" {
		return p
	}
	why := "not running as root"
	if os.Geteuid() == 0 {
		if _, err := exec.LookPath("apt-get"); err != nil {
			why = "no apt-get"
		} else {
			t.Log("no chromium found: installing Debian's chromium (as `make tools` does)")
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			out, err := exec.CommandContext(ctx, "sh", "-c", "apt-get update -qq && apt-get install -y -qq chromium").CombinedOutput()
			if p := find(); err == nil && p != "" {
				return p
			}
			why = fmt.Sprintf("apt-get install chromium failed: %v\n%s", err, out)
		}
	}
	t.Skipf("the console's browser tests need Chromium, and none was found or could be installed (%s): run `make tools` (apt-get install chromium) or set MAYFLY_CHROMIUM", why)
	return ""
}

// testServer is the HTTP API with the console over a fresh engine whose
// clock the test moves, with views and an expiry pager (whose loop is not
// started: the console runs it).
type testServer struct {
	url     string
	clk     *engine.FakeClock
	history *httpapi.StatsHistory // sampled by hand (Sample), not by Run
	logs    *logtest.Buffer       // the HTTP API's log
}

const (
	adminUser = "Administrator"
	adminPass = "password"
	t0        = 1_700_000_000
)

// newTestServer starts a testServer; opts change its HTTP API's options.
func newTestServer(t *testing.T, opts ...func(*httpapi.Options)) *testServer {
	t.Helper()
	clk := engine.NewFakeClock(t0)
	eng, err := engine.Open(t.TempDir(), &engine.Options{Clock: clk, NumPartitions: 8, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.CreateBucket(context.Background(), engine.DefaultBucketSettings("default")); err != nil {
		t.Fatal(err)
	}
	vs, err := views.New(context.Background(), eng, nil)
	if err != nil {
		t.Fatal(err)
	}
	runs := httpapi.NewPagerRuns(0)
	pm := pager.New(eng, &pager.Options{Events: &pager.Events{RunEnd: runs.RunEnd}})
	users, err := auth.Open(t.TempDir(), &auth.Options{AdminUser: adminUser, AdminPassword: adminPass,
		Argon2: &auth.Argon2Params{Time: 1, Memory: 64, Threads: 1, KeyLen: 32}, ScramIterations: 100})
	if err != nil {
		t.Fatal(err)
	}
	history := httpapi.NewStatsHistory(0, 0)
	logs := &logtest.Buffer{}
	o := &httpapi.Options{Views: vs, Pager: pm, Auth: users, PagerRuns: runs, Console: console.Handler(),
		StatsHistory: history, Logger: logs.Logger()}
	for _, f := range opts {
		f(o)
	}
	srv := httptest.NewServer(httpapi.New(eng, o))
	t.Cleanup(func() {
		srv.Close()
		pm.Close(context.Background())
		vs.Close()
		eng.Close()
	})
	return &testServer{url: srv.URL, clk: clk, history: history, logs: logs}
}

// adminPut sends body (of type ctype) to path as the administrator, behind
// the console's back, and returns the response, its body read and closed.
func (s *testServer) adminPut(t *testing.T, path, ctype, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, s.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(adminUser, adminPass)
	req.Header.Set("Content-Type", ctype)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// browser is a headless Chromium tab.
type browser struct {
	t    *testing.T
	ctx  context.Context
	mu   sync.Mutex
	errs []string // exceptions and policy violations the page reported
	shot int
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	exe := chromiumPath(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.NoSandbox, // Chromium refuses to sandbox as root, as CI runs
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-gpu", true),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(allocCtx)
	ctx, cancelTimeout := context.WithTimeout(ctx, browserTimeout)
	b := &browser{t: t, ctx: ctx}
	// The first action starts the browser; then the console is followed.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		cancelTimeout()
		cancelCtx()
		cancelAlloc()
		t.Fatalf("starting %s: %v", exe, err)
	}
	msgs := chromedp.Console(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			// Network errors (a 401 for a wrong password, the 400 of a
			// refused design document) are the API answering; anything
			// the page threw, or a Content-Security-Policy refusal, is a
			// console bug.
			if m.IsException() || strings.Contains(m.Text, "Content Security Policy") || (m.Type == chromedp.ConsoleError && m.Source == "") {
				b.mu.Lock()
				b.errs = append(b.errs, m.String())
				b.mu.Unlock()
			}
		}
	})
	t.Cleanup(func() {
		cancelTimeout()
		if err := chromedp.Cancel(ctx); err != nil && !errors.Is(err, context.Canceled) {
			t.Logf("closing the browser: %v", err)
		}
		cancelCtx()
		cancelAlloc() // waits for the browser process to exit
		wg.Wait()
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, e := range b.errs {
			t.Errorf("the page reported: %s", e)
		}
	})
	return b
}

// do runs actions, failing the test with what the page shows.
func (b *browser) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v\nthe page shows:\n%s", what, err, b.pageText())
	}
}

// pageText is the text of <main>, for failure messages.
func (b *browser) pageText() string {
	ctx, cancel := context.WithTimeout(b.ctx, 3*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('main') ? document.querySelector('main').innerText : document.body.innerText`))
	if err != nil {
		return "(unreadable: " + err.Error() + ")"
	}
	return s
}

// text returns the text of the first element sel selects, "" if none.
func (b *browser) text(sel string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](fmt.Sprintf(`(() => { const e = document.querySelector(%q); return e ? e.textContent : ''; })()`, sel)))
	if err != nil {
		b.t.Fatalf("reading %s: %v", sel, err)
	}
	return s
}

// waitText waits until the element sel selects shows one of wants in its
// text. (A countdown read just after its page loaded may already have
// ticked: "in 1h 0m" or "in 59m 59s".)
func (b *browser) waitText(sel string, wants ...string) {
	b.t.Helper()
	js := fmt.Sprintf(`(() => { const e = document.querySelector(%q); return !!e && %s.some((w) => e.textContent.includes(w)); })()`, sel, jsStrings(wants))
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[bool](js, chromedp.WithPollingTimeout(15*time.Second), chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		b.t.Fatalf("waiting for %q in %s: %v; it shows %q\nthe page shows:\n%s", wants, sel, err, b.text(sel), b.pageText())
	}
}

// waitAllText waits until the element sel selects shows every one of
// wants in its text at once.
func (b *browser) waitAllText(sel string, wants ...string) {
	b.t.Helper()
	js := fmt.Sprintf(`(() => { const e = document.querySelector(%q); return !!e && %s.every((w) => e.textContent.includes(w)); })()`, sel, jsStrings(wants))
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[bool](js, chromedp.WithPollingTimeout(15*time.Second), chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		b.t.Fatalf("waiting for all of %q in %s: %v; it shows %q\nthe page shows:\n%s", wants, sel, err, b.text(sel), b.pageText())
	}
}

// jsStrings writes a JavaScript array of strings.
func jsStrings(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(q, ",") + "]"
}

// waitValue waits until the value of the input or textarea sel selects
// holds want.
func (b *browser) waitValue(sel, want string) {
	b.t.Helper()
	js := fmt.Sprintf(`(() => { const e = document.querySelector(%q); return !!e && e.value.includes(%q); })()`, sel, want)
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[bool](js, chromedp.WithPollingTimeout(15*time.Second), chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		b.t.Fatalf("waiting for %q in the value of %s: %v; it holds %q", want, sel, err, b.value(sel))
	}
}

// click clicks the element sel selects, as a mouse does: at its centre,
// once it has stayed in place for 100 ms (a list loading above it moves it,
// and the click would land elsewhere).
func (b *browser) click(sel string) {
	b.t.Helper()
	steady := fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) return false;
		const r = JSON.stringify(e.getBoundingClientRect()), now = performance.now(), w = window.__steady || {};
		if (w.sel !== %q || w.rect !== r) { window.__steady = {sel: %q, rect: r, since: now}; return false; }
		return now - w.since >= 100; })()`, sel, sel, sel)
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[bool](steady, chromedp.WithPollingTimeout(15*time.Second), chromedp.WithPollingInterval(25*time.Millisecond))); err != nil {
		b.t.Fatalf("waiting for %s to be there and keep still: %v\nthe page shows:\n%s", sel, err, b.pageText())
	}
	b.do("clicking "+sel, chromedp.Click(chromedp.CSS(sel), chromedp.NodeVisible))
}

// set sets the value of the input, select or textarea sel selects, as the
// user would leave it (input and change events fire).
func (b *browser) set(sel, value string) {
	b.t.Helper()
	js := fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) return false;
		if (e.type === 'checkbox') e.checked = %q === 'true'; else e.value = %q;
		e.dispatchEvent(new Event('input', {bubbles: true})); e.dispatchEvent(new Event('change', {bubbles: true})); return true; })()`, sel, value, value)
	b.do("waiting for "+sel, chromedp.WaitVisible(chromedp.CSS(sel)))
	ok, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](js))
	if err != nil || !ok {
		b.t.Fatalf("setting %s: %v (found: %v)", sel, err, ok)
	}
}

// screenshot writes the page to $MAYFLY_CONSOLE_SHOTS/TEST-NN-name.png, if set.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	dir := os.Getenv("MAYFLY_CONSOLE_SHOTS")
	if dir == "" {
		return
	}
	buf, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return
	}
	b.shot++
	if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%02d-%s.png", b.t.Name(), b.shot, name)), buf, 0o644); err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
	}
}

// open loads the console at url.
func (b *browser) open(url string) {
	b.t.Helper()
	b.do("opening "+url, chromedp.Navigate(url))
}

// login opens the console and logs in as the administrator.
func (b *browser) login(srv *testServer) {
	b.t.Helper()
	b.loginAs(srv, adminUser, adminPass)
}

// loginAs opens the console and logs in as user, waiting for the bucket
// list to show bucket default.
func (b *browser) loginAs(srv *testServer, user, password string) {
	b.t.Helper()
	b.open(srv.url + "/ui/")
	b.waitText("#main h1", "Log in")
	b.set("#login-user", user)
	b.set("#login-password", password)
	b.click("#login-submit")
	b.waitText("#bucket-list", "default")
}

// newDevView goes to the views page and creates development design
// document dev_ddoc with one view, leaving its editor open.
func (b *browser) newDevView(ddoc, view string) {
	b.t.Helper()
	b.click(`#nav a[href^="#/views/"]`)
	b.waitText("#ddoc-list", "Development")
	b.set("#ddoc-new-name", ddoc)
	b.set("#ddoc-new-view", view)
	b.click("#ddoc-create")
	b.waitText("#ddoc-detail h2", "_design/dev_"+ddoc)
}

// value returns the value of the input, select or textarea sel selects.
func (b *browser) value(sel string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](fmt.Sprintf(`(() => { const e = document.querySelector(%q); return e ? e.value : '(none)'; })()`, sel)))
	if err != nil {
		b.t.Fatalf("reading %s: %v", sel, err)
	}
	return s
}

// eval runs a JavaScript expression in the page, awaiting a promise.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}
