package console_test

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// adminDo sends a request as the administrator behind the console's back
// and returns the response, its body read and closed.
func (s *testServer) adminDo(t *testing.T, method, path, ctype, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, s.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(adminUser, adminPass)
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// The stats charts open with the server's recent samples drawn: five
// samples taken before the page opens, and the page's first poll, make six
// points on the items chart as soon as it shows (a chart fed by the page's
// own polls alone starts with one). The console's pages and its icon cause
// no failed authentication in the server's log.
func TestConsoleStatsHistory(t *testing.T) {
	b := newBrowser(t)
	srv := newTestServer(t)
	for i := range 5 {
		if resp := srv.adminPut(t, "/default/docs/d"+strconv.Itoa(i), "application/json", `{}`); resp.StatusCode >= 300 {
			t.Fatalf("writing d%d: %s", i, resp.Status)
		}
		srv.history.Sample()
	}
	b.login(srv)
	b.click(`#nav a[href^="#/stats/"]`)
	const chart = `#stats-charts figure[data-stat="curr_items"]`
	b.waitText(chart+" .latest", "5")
	pts := eval[int](b, `(() => { const p = document.querySelector('#stats-charts figure[data-stat="curr_items"] polyline'); return p ? p.getAttribute('points').trim().split(/\s+/).length : 0; })()`)
	if pts < 6 {
		t.Errorf("the items chart opens with %d points, want the 5 kept samples and the first poll", pts)
	}
	b.screenshot("stats-history")
	if logs := srv.logs.String(); strings.Contains(logs, "authentication failed") {
		t.Errorf("the console's session logged a failed authentication:\n%s", logs)
	}
}

// Pager runs seconds apart get bars labelled apart: each label is the run's
// time to the second, not the same minute for every bar.
func TestConsolePagerRunLabels(t *testing.T) {
	b := newBrowser(t)
	srv := newTestServer(t)
	for range 3 {
		if resp := srv.adminDo(t, http.MethodPost, "/pools/default/buckets/default/controller/runExpiryPager", "application/x-www-form-urlencoded", ""); resp.StatusCode != http.StatusOK {
			t.Fatalf("running the pager: %s", resp.Status)
		}
		srv.clk.Advance(10)
	}
	b.login(srv)
	b.click(`#nav a[href^="#/expiry/"]`)
	b.waitText("#runs-table", "UTC")
	labels := eval[[]string](b, `[...document.querySelectorAll('#runs-chart .label')].map((e) => e.textContent)`)
	// t0 is 2023-11-14 22:13:20 UTC: the runs are at :20, :30 and :40.
	want := []string{"22:13:20", "22:13:30", "22:13:40"}
	if strings.Join(labels, " ") != strings.Join(want, " ") {
		t.Errorf("run labels %q, want %q", labels, want)
	}
	b.screenshot("run-labels")
}
