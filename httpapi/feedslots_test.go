package httpapi_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/httpapi"
)

// TestOpenFeedsDoNotHoldEverySlot checks that one user's continuous change
// feeds, each open for as long as its heartbeat keeps it, cannot take every
// --max-requests slot: another user's plain read is still served rather
// than answered 503 too_many_requests. A review found that a feed holds its
// slot for its whole life with no cap per user, so a data_dcp_reader that
// opens MaxRequests feeds keeps every other caller, the administrator
// included, out for as long as it likes.
func TestOpenFeedsDoNotHoldEverySlot(t *testing.T) {
	const slots = 8
	f := newFixtureOpts(t, &httpapi.Options{MaxRequests: slots}, nil)
	f.addUser("follower", "follower-pw", "data_dcp_reader[default]")
	if st, _, body := f.do("PUT", "/default/docs/x", "application/json", `{"n":1}`); st != 201 {
		t.Fatalf("PUT x: %d %s", st, body)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	opened := 0
	for range 2 * slots {
		req, err := http.NewRequestWithContext(ctx, "GET", f.srv.URL+"/default/_changes?feed=continuous&since=now&heartbeat=1000", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth("follower", "follower-pw")
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 {
			resp.Body.Close()
			continue
		}
		opened++
		defer resp.Body.Close()
	}
	t.Logf("the follower holds %d feeds open", opened)
	// Poll: the administrator's read must be served while the feeds stay open.
	var st int
	var body string
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) { // wall clock: a hang guard, generous for a busy machine
		if st, _, body = f.do("GET", "/default/docs/x", "", ""); st == 200 {
			return
		}
	}
	t.Fatalf("with %d continuous feeds of one user open, the administrator's GET is %d %s, want 200", opened, st, body)
}

// TestStreamsPerUserCapped checks the streams' own bounds: a user with
// MaxStreamsPerUser streams open (change feeds and configuration streams
// alike) is answered 429 for one more, while another user still opens
// one, and every stream, a configuration stream as an SDK opens it
// included, gets its first bytes although the streams outnumber the
// request slots.
func TestStreamsPerUserCapped(t *testing.T) {
	const slots, perUser = 4, 3
	f := newFixtureOpts(t, &httpapi.Options{MaxRequests: slots, MaxStreams: 100, MaxStreamsPerUser: perUser}, nil)
	f.addUser("follower", "follower-pw", "data_dcp_reader[default],bucket_admin[default]")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	open := func(user, pass, path string) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, "GET", f.srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth(user, pass)
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	paths := []string{
		"/default/_changes?feed=continuous&since=now&heartbeat=1000",
		"/default/_changes?feed=longpoll&since=now",
		"/pools/default/bs/default",
	}
	for _, p := range paths {
		if resp := open("follower", "follower-pw", p); resp.StatusCode != 200 {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("GET %s: %d %s, want 200", p, resp.StatusCode, b)
		}
	}
	resp := open("follower", "follower-pw", "/default/_changes?feed=eventsource&since=now")
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(b), "too_many_requests") {
		t.Fatalf("the follower's stream beyond its %d: %d %s, want 429 too_many_requests", perUser, resp.StatusCode, b)
	}
	// A plain feed is not a stream: it is served.
	if st, _, body := f.doAs("follower", "follower-pw", "GET", "/default/_changes", "", ""); st != 200 {
		t.Fatalf("the follower's feed=normal: %d %s, want 200", st, body)
	}
	// The administrator's streams are its own; with the follower's they
	// outnumber the slots, and each sends its configuration at once.
	for range perUser {
		resp := open(adminUser, adminPass, "/pools/default/bs/default")
		if resp.StatusCode != 200 {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("the administrator's configuration stream: %d %s, want 200", resp.StatusCode, b)
		}
		if line, err := bufio.NewReader(resp.Body).ReadString('}'); err != nil || !strings.HasPrefix(line, "{") {
			t.Fatalf("the configuration stream's first bytes: %q, %v", line, err)
		}
	}
}
