package httpapi_test

import (
	"context"
	"net/http"
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
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if st, _, body = f.do("GET", "/default/docs/x", "", ""); st == 200 {
			return
		}
	}
	t.Fatalf("with %d continuous feeds of one user open, the administrator's GET is %d %s, want 200", opened, st, body)
}
