package httpapi_test

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/audit"
	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/httpapi"
	"github.com/mayflydb/mayfly/internal/logtest"
)

// These tests play the attacks of issue 18 at a small scale and check that
// the honest caller is served. They assert what happened, never how fast.

// flood runs fn in n goroutines, over and over, until the returned stop is
// called (which waits for them).
func flood(n int, fn func(g, i int)) (stop func()) {
	var done atomic.Bool
	var wg sync.WaitGroup
	for g := range n {
		wg.Go(func() {
			for i := 0; !done.Load(); i++ {
				fn(g, i)
			}
		})
	}
	return func() { done.Store(true); wg.Wait() }
}

// statusOf sends req on its own connection-reusing client and returns the
// status (0 on a transport error).
func statusOf(c *http.Client, req *http.Request) int {
	resp, err := c.Do(req)
	if err != nil {
		return 0
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// A flood of wrong passwords (distinct ones, so no two share a check) must
// not keep a logged-in administrator out: password checks wait before a
// request holds a slot, and a verified credential skips them.
func TestWrongPasswordFloodKeepsLoggedInUser(t *testing.T) {
	// Checks that cost something (8 MiB of argon2), few slots, and no
	// back-off, so that the flood keeps the password checks busy throughout.
	f := newFixtureOpts(t, &httpapi.Options{MaxRequests: 4},
		&auth.Options{Argon2: &auth.Argon2Params{Time: 1, Memory: 8 << 10, Threads: 1, KeyLen: 32},
			Throttle: &auth.Throttle{UserFree: 1 << 30, SourceFree: 1 << 30}})
	if st, _, body := f.do("GET", "/default/docs/x", "", ""); st != 404 {
		t.Fatalf("log in: %d %s", st, body)
	}
	var refused [600]atomic.Int64
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
	defer client.CloseIdleConnections()
	stop := flood(24, func(g, i int) {
		req, _ := http.NewRequest("GET", f.srv.URL+"/default/docs/x", nil)
		user := adminUser
		if g%2 == 1 {
			user = fmt.Sprintf("nobody%d", g)
		}
		req.SetBasicAuth(user, fmt.Sprintf("wrong-%d-%d", g, i))
		refused[statusOf(client, req)].Add(1)
	})
	var got []int
	for range 30 {
		st, _, _ := f.do("GET", "/default/docs/x", "", "")
		got = append(got, st)
	}
	stop()
	for i, st := range got {
		if st != 404 {
			t.Errorf("logged-in request %d during the flood: %d, want 404 (all: %v)", i, st, got)
			break
		}
	}
	if refused[401].Load() == 0 {
		t.Fatalf("the flood's passwords were never checked: 401 %d, 503 %d", refused[401].Load(), refused[503].Load())
	}
	if refused[200].Load()+refused[404].Load() != 0 {
		t.Fatal("a wrong password got in")
	}
}

// Failed logins with huge user names cost one log line and one audit line
// per source, user name and reason per interval, then one line with their
// count; neither holds more than 128 bytes of the name. A name over 128
// bytes counts as a failure in the source's throttle (30, then 429),
// though no user has it.
func TestFailedLoginsCostBoundedDisk(t *testing.T) {
	var logs logtest.Buffer
	f := newFixtureOpts(t, &httpapi.Options{Logger: logs.Logger()}, nil)
	// The administrator logs in first: a credential verified lately skips
	// the source's back-off the flood below brings on.
	if st, _, body := f.do("GET", "/default/docs/x", "", ""); st != 404 {
		t.Fatalf("log in: %d %s", st, body)
	}
	huge := strings.Repeat("u", 45_000)
	const n = 200
	var wg sync.WaitGroup
	var unauthorized, throttled, bad atomic.Int64
	for g := range 8 {
		wg.Go(func() {
			for i := range n / 8 {
				switch st, _, _ := f.doAs(huge, fmt.Sprintf("pw-%d-%d", g, i), "GET", "/default/docs/x", "", ""); st {
				case 401:
					unauthorized.Add(1)
				case 429:
					throttled.Add(1)
				default:
					bad.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if bad.Load() != 0 {
		t.Fatalf("%d of %d failed logins were answered neither 401 nor 429", bad.Load(), n)
	}
	// 30 failures from a source are free (auth.Throttle), plus those of
	// the 8 clients checked at once as the 30th was counted.
	if u := unauthorized.Load(); u < 30 || u > 30+8 || throttled.Load() == 0 {
		t.Fatalf("of %d failed logins with a name over 128 bytes from one source: %d answered 401, %d 429; want 30 (up to 38) 401, the rest 429",
			n, u, throttled.Load())
	}
	failed := func() []audit.Event {
		var out []audit.Event
		for _, e := range f.auditEvents() {
			if e.Action == audit.ActionLoginFailed {
				out = append(out, e)
			}
		}
		return out
	}
	first := failed()
	if len(first) != 2 { // one per reason: unauthenticated, throttled
		t.Fatalf("audit lines for %d failed logins: %d (%.200v)", n, len(first), first)
	}
	for _, e := range first {
		if len(e.Target) > auth.MaxUserName || !strings.HasPrefix(e.Target, "uuu") {
			t.Fatalf("audit line's user name: %d bytes (%.200v)", len(e.Target), e)
		}
	}
	if recs := logs.Records(t, "authentication failed"); len(recs) != 2 || len(recs[0]["user"].(string)) > auth.MaxUserName || len(recs[1]["user"].(string)) > auth.MaxUserName {
		t.Fatalf("log lines for %d failed logins: %d", n, len(recs))
	}
	if strings.Contains(logs.String(), huge[:200]) {
		t.Fatal("a log line holds the whole user name")
	}
	// The interval ends: the next request writes the counts.
	f.clk.Advance(httpapi.DefaultFailureLogInterval)
	if st, _, _ := f.do("GET", "/default/docs/x", "", ""); st != 404 {
		t.Fatalf("administrator: %d", st)
	}
	recs := logs.Records(t, "authentication failed, repeated")
	counted := 0.0
	for _, r := range recs {
		counted += r["count"].(float64)
	}
	if len(recs) != 2 || counted != n-2 {
		t.Fatalf("summary log lines (want 2, counting %d): %v", n-2, recs)
	}
	ev := failed()
	if len(ev) != 4 {
		t.Fatalf("audit lines after the interval: %d", len(ev))
	}
	for _, e := range ev[2:] {
		if after, _ := json.Marshal(e.After); !strings.Contains(string(after), `"count":`) || e.Target != first[0].Target {
			t.Fatalf("summary audit line: %+v", e)
		}
	}

	// Many user names from one source: at most 16 are named, the rest
	// count as "(many)" (one line for those refused 401, one for those the
	// back-off refused 429).
	for i := range 100 {
		f.doAs(fmt.Sprintf("name%d", i), "wrong-pw", "GET", "/default/docs/x", "", "")
	}
	named, many := 0, 0
	for _, e := range failed()[4:] {
		if e.Target == "(many)" {
			many++
		} else {
			named++
		}
	}
	if named != 16 || many < 1 || many > 2 {
		t.Fatalf("audit lines for 100 user names from one source: %d named, %d (many)", named, many)
	}
}

// A source (or a user name) that keeps failing is answered 429 without a
// password check, with Retry-After; the logged-in administrator is not.
func TestFailedLoginsBackOff(t *testing.T) {
	f := newFixtureOpts(t, nil, &auth.Options{Argon2: cheapArgon2, Throttle: &auth.Throttle{UserFree: 3, SourceFree: 1000, Base: time.Hour}})
	f.do("GET", "/default/docs/x", "", "") // logged in
	for i := range 3 {
		if st, _, _ := f.doAs(adminUser, fmt.Sprintf("wrong%d", i), "GET", "/default/docs/x", "", ""); st != 401 {
			t.Fatalf("failure %d: %d", i, st)
		}
	}
	st, h, body := f.doAs(adminUser, "wrong-again", "GET", "/default/docs/x", "", "")
	if st != 429 || h.Get("Retry-After") != "3600" || jsonOf(t, body)["error"] != "too_many_requests" {
		t.Fatalf("after 3 failures: %d %v %s", st, h, body)
	}
	if st, _, _ := f.do("GET", "/default/docs/x", "", ""); st != 404 {
		t.Fatalf("logged-in administrator during the back-off: %d", st)
	}
	if _, _, body := f.do("GET", "/metrics", "", ""); !strings.Contains(body, `mayfly_http_refused_total{reason="throttled"} 1`) {
		t.Error("throttled refusals not counted")
	}
}

// A views_reader's keys cannot multiply memory: a key longer than any view
// key is a 400, too many keys a 400, a body far over the limit a 413 decided
// from Content-Length; an honest multi-key query still works.
func TestViewKeysBounded(t *testing.T) {
	f := newFixture(t)
	f.addUser("viewer", "viewerpw", "views_reader[default]")
	f.do("PUT", "/default/_design/d", "application/json", `{"views":{"v":{"map":"function (doc, meta) { emit(meta.id, null); }"}}}`)
	f.do("PUT", "/default/docs/a", "application/json", `1`)
	const path = "/default/_design/d/_view/v?stale=false"
	for _, c := range []struct {
		name, body string
		status     int
		code       string
	}{
		{"a key over the limit", `{"keys":["` + strings.Repeat("k", 5000) + `"]}`, 400, "bad_request"},
		{"too many keys", `{"keys":[` + strings.Repeat(`1,`, 70_000) + `1]}`, 400, "bad_request"},
		{"a body far over the limit", `{"keys":["` + strings.Repeat("k", 9<<20) + `"]}`, 413, "too_large"},
	} {
		st, _, body := f.doAs("viewer", "viewerpw", "POST", path, "application/json", c.body)
		if st != c.status || jsonOf(t, body)["error"] != c.code {
			t.Errorf("%s: %d %.300s", c.name, st, body)
		}
	}
	st, _, body := f.doAs("viewer", "viewerpw", "POST", path, "application/json", `{"keys":["a","b"]}`)
	if st != 200 || !strings.Contains(body, `"id":"a"`) {
		t.Fatalf("honest keys: %d %s", st, body)
	}
}

// rawRequest opens a connection and sends a request's head.
func rawRequest(t *testing.T, f *fixture, head string) net.Conn {
	t.Helper()
	u, _ := url.Parse(f.srv.URL)
	nc, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	auth := base64.StdEncoding.EncodeToString([]byte(adminUser + ":" + adminPass))
	head = strings.Replace(head, "\r\n", "\r\nHost: "+u.Host+"\r\nAuthorization: Basic "+auth+"\r\n", 1)
	if _, err := io.WriteString(nc, head); err != nil {
		t.Fatal(err)
	}
	return nc
}

// readStatus reads an answer's status code and body, waiting at most a
// generous deadline (to catch a hang, not to time anything).
func readStatus(t *testing.T, nc net.Conn) (int, string) {
	t.Helper()
	nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(b)
}

// A body declared far over the limit is a readable 413 at once, before a
// byte of it is read, absurd Content-Length included.
func TestBodyOverLimitAnsweredFromContentLength(t *testing.T) {
	f := newFixture(t)
	f.do("GET", "/default/docs/x", "", "") // logged in
	nc := rawRequest(t, f, "PUT /default/docs/big HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 99999999999\r\n\r\n")
	if st, body := readStatus(t, nc); st != 413 || jsonOf(t, body)["error"] != "too_large" {
		t.Fatalf("absurd Content-Length: %d %s", st, body)
	}
	nc = rawRequest(t, f, fmt.Sprintf("PUT /default/docs/big HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", 64<<20))
	go func() { // the client sends its body regardless; the answer still arrives
		chunk := make([]byte, 64<<10)
		for range 1024 {
			if _, err := nc.Write(chunk); err != nil {
				return
			}
		}
	}()
	if st, body := readStatus(t, nc); st != 413 || !strings.Contains(body, "over this endpoint's limit") {
		t.Fatalf("a body far over the limit: %d %s", st, body)
	}
	if st, _, _ := f.do("GET", "/default/docs/big", "", ""); st != 404 {
		t.Fatalf("the big document was stored: %d", st)
	}
}

// Trickled bodies cannot hold every slot: requests still receiving a large
// body may take all but ReservedRequests slots, and a body slower than
// MinBodyRate after BodyGrace is cut with 408, so probes keep being served.
func TestTrickledBodiesDoNotHoldEverySlot(t *testing.T) {
	f := newFixtureOpts(t, &httpapi.Options{MaxRequests: 6, ReservedRequests: 2, MinBodyRate: 1000, BodyGrace: 300 * time.Millisecond}, nil)
	f.do("GET", "/default/docs/x", "", "") // logged in
	u, _ := url.Parse(f.srv.URL)
	authz := base64.StdEncoding.EncodeToString([]byte(adminUser + ":" + adminPass))
	var cut, unavailable atomic.Int64
	stop := flood(10, func(g, i int) {
		nc, err := net.Dial("tcp", u.Host)
		if err != nil {
			return
		}
		defer nc.Close()
		fmt.Fprintf(nc, "PUT /default/docs/t%d HTTP/1.1\r\nHost: %s\r\nAuthorization: Basic %s\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n[", g, u.Host, authz)
		answered := make(chan int, 1)
		go func() {
			resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
			if err != nil {
				answered <- 0
				return
			}
			resp.Body.Close()
			answered <- resp.StatusCode
		}()
		for {
			select {
			case st := <-answered:
				switch st {
				case 408:
					cut.Add(1)
				case 503:
					unavailable.Add(1)
				}
				return
			case <-time.After(100 * time.Millisecond):
				nc.Write([]byte(" ")) // one byte every 100ms
			}
		}
	})
	var got []int
	for i := range 20 {
		st, _, _ := f.do("GET", "/default/docs/x", "", "")
		got = append(got, st)
		st, _, _ = f.do("PUT", fmt.Sprintf("/default/docs/probe%d", i), "application/json", `{"honest":true}`)
		got = append(got, st)
		time.Sleep(50 * time.Millisecond) // spread the probes over the flood
	}
	// Wait (at most a generous deadline) for the flood to have been cut once.
	for deadline := time.Now().Add(30 * time.Second); cut.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	for i, st := range got {
		if want := []int{404, 201}[i%2]; st != want {
			t.Fatalf("probe %d during the trickle flood: %d, want %d (all: %v)", i, st, want, got)
		}
	}
	if cut.Load() == 0 {
		t.Fatalf("no trickled body was cut (503s: %d)", unavailable.Load())
	}
}

// A NUL byte in a new document's key is invalid_key at every door: the
// document API and _bulk; _bulk echoes at most 256 bytes of a bad id.
func TestNULKeyAndLongBulkID(t *testing.T) {
	f := newFixture(t)
	if st, _, body := f.do("PUT", "/default/docs/a%00b", "application/json", `1`); st != 400 || jsonOf(t, body)["error"] != "invalid_key" {
		t.Fatalf("NUL key: %d %s", st, body)
	}
	long := strings.Repeat("i", 1<<20)
	res := f.bulkLines(`{"op":"upsert","id":"a\u0000b","doc":1}` + "\n" + `{"op":"upsert","id":"` + long + `","doc":1}` + "\n")
	if len(res) != 2 || res[0]["error"] != "invalid_key" || res[1]["error"] != "invalid_key" {
		t.Fatalf("bulk: %.300v", res)
	}
	if id, _ := res[1]["id"].(string); len(id) > 256 || !strings.HasPrefix(id, "iii") {
		t.Fatalf("echoed id of %d bytes", len(id))
	}
}
