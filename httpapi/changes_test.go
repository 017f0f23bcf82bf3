package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/auth"
)

type changesAnswer struct {
	Results []struct {
		Seq     string `json:"seq"`
		ID      string `json:"id"`
		Changes []struct {
			Rev string `json:"rev"`
		} `json:"changes"`
		Deleted bool            `json:"deleted"`
		Expired bool            `json:"expired"`
		Doc     json.RawMessage `json:"doc"`
	} `json:"results"`
	LastSeq string `json:"last_seq"`
	Pending int    `json:"pending"`
}

func (f *fixture) changes(query string) changesAnswer {
	f.t.Helper()
	st, _, body := f.do("GET", "/default/_changes?"+query, "", "")
	if st != 200 {
		f.t.Fatalf("_changes?%s: %d %s", query, st, body)
	}
	var a changesAnswer
	if err := json.Unmarshal([]byte(body), &a); err != nil {
		f.t.Fatalf("_changes?%s: %v\n%s", query, err, body)
	}
	return a
}

// The feed over HTTP: rows with the rev the document API shows, expirations
// by the pager and by a read as deletion rows marked expired, a since from
// another history refused, doc_ids on POST.
func TestChangesFeed(t *testing.T) {
	f := newFixture(t)
	for _, k := range []string{"a", "paged", "lazy"} {
		expiry := "0"
		if k != "a" {
			expiry = "10"
		}
		if st, _, body := f.do("PUT", "/default/docs/"+k+"?expiry="+expiry, "", `{"k":"`+k+`"}`); st != 201 {
			t.Fatalf("PUT %s: %d %s", k, st, body)
		}
	}
	_, _, body := f.do("GET", "/default/docs/a?meta=true", "", "")
	rev := jsonOf(t, body)["meta"].(map[string]any)["rev"].(string)
	all := f.changes("include_docs=true")
	if len(all.Results) != 3 || all.Pending != 0 {
		t.Fatalf("feed: %+v", all)
	}
	for _, r := range all.Results {
		if r.ID == "a" && (r.Changes[0].Rev != rev || !strings.Contains(string(r.Doc), `"k":"a"`)) {
			t.Errorf("row of a: %+v, want rev %s and its body", r, rev)
		}
	}

	f.clk.Advance(11)
	if st, _, _ := f.do("GET", "/default/docs/lazy", "", ""); st != 404 {
		t.Fatalf("GET expired: %d", st)
	}
	if _, err := f.pager.RunNow(context.Background(), "default"); err != nil {
		t.Fatal(err)
	}
	after := f.changes("since=" + url.QueryEscape(all.LastSeq))
	if len(after.Results) != 2 {
		t.Fatalf("after expiry: %+v", after)
	}
	for _, r := range after.Results {
		if !r.Deleted || !r.Expired || len(r.Changes) != 1 {
			t.Errorf("expiration row: %+v", r)
		}
	}

	st, _, body := f.do("GET", "/default/_changes?since=AQAAAAAAAAABAQ", "", "")
	if st != 400 || jsonOf(t, body)["error"] != "rollback" {
		t.Errorf("since from another history: %d %s", st, body)
	}
	st, _, body = f.do("GET", "/default/_changes?feed=sideways", "", "")
	if st != 400 || jsonOf(t, body)["error"] != "bad_request" {
		t.Errorf("bad feed: %d %s", st, body)
	}

	st, _, body = f.do("POST", "/default/_changes?filter=_doc_ids", "application/json", `{"doc_ids":["a","nothere"]}`)
	var a changesAnswer
	if st != 200 || json.Unmarshal([]byte(body), &a) != nil || len(a.Results) != 1 || a.Results[0].ID != "a" {
		t.Errorf("doc_ids: %d %s", st, body)
	}

	// Server-sent events are text/event-stream.
	_, h, body := f.do("GET", "/default/_changes?feed=eventsource&timeout=0", "", "")
	if h.Get("Content-Type") != "text/event-stream" || strings.Count(body, "\ndata: ")+strings.Count(body[:min(6, len(body))], "data: ") != 3 {
		t.Errorf("eventsource: %s %q", h.Get("Content-Type"), body)
	}
}

// data_dcp_reader reads the feed; data_reader alone does not; bucket_admin
// does, but include_docs needs data_reader too.
func TestChangesRoles(t *testing.T) {
	f := newFixture(t)
	for name, roles := range map[string]string{"dcp": "data_dcp_reader[default]", "reader": "data_reader[default]", "badmin": "bucket_admin[default]", "other": "data_dcp_reader[other]"} {
		rs, err := auth.ParseRoles(roles)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.users.PutUser(name, name, name+"-pw", rs); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		user, query string
		want        int
	}{
		{"dcp", "", 200}, {"dcp", "include_docs=true", 200},
		{"reader", "", 403},
		{"badmin", "", 200}, {"badmin", "include_docs=true", 403},
		{"other", "", 403},
	} {
		if st, _, body := f.doAs(c.user, c.user+"-pw", "GET", "/default/_changes?"+c.query, "", ""); st != c.want {
			t.Errorf("%s ?%s: %d, want %d (%s)", c.user, c.query, st, c.want, body)
		}
	}
}

// feedGoroutines counts the server's goroutines running a change feed.
func feedGoroutines() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), "changes.(*Feed).Run(")
}

// A continuous feed streams changes as they come; when its client hangs
// up, the server's goroutine ends.
func TestChangesContinuousClientHangsUp(t *testing.T) {
	f := newFixture(t)
	if st, _, body := f.do("PUT", "/default/docs/a", "", `{}`); st != 201 {
		t.Fatalf("PUT: %d %s", st, body)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp := f.adminStream(ctx, t, "/default/_changes?feed=continuous&heartbeat=60000")
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	next := func() string {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("feed ended: %v", lines.Err())
		}
		return lines.Text()
	}
	if l := next(); !strings.Contains(l, `"id":"a"`) {
		t.Fatalf("first row: %q", l)
	}
	if st, _, body := f.do("PUT", "/default/docs/b", "", `{}`); st != 201 {
		t.Fatalf("PUT: %d %s", st, body)
	}
	if l := next(); !strings.Contains(l, `"id":"b"`) {
		t.Fatalf("streamed row: %q", l)
	}
	if n := feedGoroutines(); n != 1 {
		t.Fatalf("%d feed goroutines while streaming, want 1", n)
	}
	cancel() // the client hangs up
	resp.Body.Close()
	for deadline := time.Now().Add(30 * time.Second); feedGoroutines() != 0; { // wall clock: a hang's deadline
		if time.Now().After(deadline) { // wall clock: a hang's deadline
			t.Fatal("the feed's goroutine outlived its client")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A timeout of any size is a long wait: one near what a time.Duration of
// milliseconds holds does not drop the connection unanswered (the write
// deadline, moved by the timeout, overflowed into the past), and one over it
// does not end the feed at once (it wrapped round to a fraction of a
// millisecond; changes.TestHugeWaits checks that without a race).
func TestChangesHugeTimeout(t *testing.T) {
	f := newFixture(t)
	if st, _, body := f.do("PUT", "/default/docs/a", "", `{}`); st != 201 {
		t.Fatalf("PUT: %d %s", st, body)
	}
	for i, timeout := range []string{"18446744073710", "9223372036854", "99999999999999999"} {
		t.Run(timeout, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, "GET", f.srv.URL+"/default/_changes?feed=continuous&since=now&limit=1&timeout="+timeout, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.SetBasicAuth(adminUser, adminPass)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("feed: %v", err)
			}
			defer resp.Body.Close()
			// The feed waits for a change after since=now: the write comes
			// once it has answered its headers.
			key := fmt.Sprintf("b%d", i)
			if st, _, body := f.do("PUT", "/default/docs/"+key, "", `{}`); st != 201 {
				t.Fatalf("PUT: %d %s", st, body)
			}
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatalf("reading the feed: %v", err)
			}
			lines := strings.Split(strings.TrimSpace(string(body)), "\n")
			if resp.StatusCode != 200 || len(lines) != 2 || !strings.Contains(lines[0], `"id":"`+key+`"`) || !strings.Contains(lines[1], `"last_seq"`) {
				t.Fatalf("continuous feed with timeout=%s: %d %q, want the row of %s then last_seq", timeout, resp.StatusCode, body, key)
			}
		})
	}
}

// eventIDs returns the id: lines of a server-sent events answer, in order.
func eventIDs(body string) []string {
	var ids []string
	for _, l := range strings.Split(body, "\n") {
		if id, ok := strings.CutPrefix(l, "id: "); ok {
			ids = append(ids, id)
		}
	}
	return ids
}

// A browser's EventSource that reconnects sends the id of the last event it
// had as Last-Event-ID, with the URL it first opened (its since unchanged):
// the feed goes on after that event, as CouchDB's does (the header
// overrides since), instead of sending every change again. The
// last-event-id query parameter is the header's alias.
func TestChangesEventSourceResumesFromLastEventID(t *testing.T) {
	f := newFixture(t)
	for _, k := range []string{"a", "b", "c"} {
		if st, _, body := f.do("PUT", "/default/docs/"+k, "", `{}`); st != 201 {
			t.Fatalf("PUT %s: %d %s", k, st, body)
		}
	}
	const path = "/default/_changes?feed=eventsource&since=0&timeout=0"
	_, _, body := f.do("GET", path, "", "")
	ids := eventIDs(body)
	if len(ids) != 3 {
		t.Fatalf("first connection: %d events, want 3: %q", len(ids), body)
	}
	st, _, body := f.doWith("GET", path, "", "", func(req *http.Request) {
		req.SetBasicAuth(adminUser, adminPass)
		req.Header.Set("Last-Event-ID", ids[0])
	})
	if got := eventIDs(body); st != 200 || !slices.Equal(got, ids[1:]) {
		t.Errorf("reconnection with Last-Event-ID of the first event: %d, events %q, want %q (%q)", st, got, ids[1:], body)
	}
	_, _, body = f.do("GET", path+"&last-event-id="+url.QueryEscape(ids[1]), "", "")
	if got := eventIDs(body); !slices.Equal(got, ids[2:]) {
		t.Errorf("last-event-id parameter of the second event: events %q, want %q (%q)", got, ids[2:], body)
	}
}

// A heartbeat keeps a longpoll, continuous or eventsource feed open past an
// explicit timeout, as CouchDB's does (its get_changes_timeout ignores
// timeout when heartbeat is set): the client gets heartbeats until a change
// comes, then the change, instead of an empty answer at the timeout.
func TestChangesHeartbeatOverridesTimeout(t *testing.T) {
	f := newFixture(t)
	for i, c := range []struct{ feed, opening, beat string }{
		{"longpoll", "{\"results\":[\n", "\n"},
		{"continuous", "", "\n"},
		{"eventsource", "", "event: heartbeat\ndata: \n\n"},
	} {
		t.Run(c.feed, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			resp := f.adminStream(ctx, t, "/default/_changes?feed="+c.feed+"&since=now&limit=1&heartbeat=10&timeout=1")
			defer resp.Body.Close()
			r := bufio.NewReader(resp.Body)
			want := c.opening + strings.Repeat(c.beat, 3)
			got := make([]byte, len(want))
			if n, err := io.ReadFull(r, got); err != nil || string(got) != want {
				rest, _ := io.ReadAll(r)
				t.Fatalf("%s feed with heartbeat=10&timeout=1: %q%q (%v), want %q: three heartbeats, not the end at the timeout", c.feed, got[:n], rest, err, want)
			}
			key := fmt.Sprintf("hb%d", i)
			if st, _, body := f.do("PUT", "/default/docs/"+key, "", `{}`); st != 201 {
				t.Fatalf("PUT: %d %s", st, body)
			}
			rest, err := io.ReadAll(r)
			if err != nil || !strings.Contains(string(rest), `"id":"`+key+`"`) {
				t.Fatalf("%s feed after a change: %q (%v), want its row", c.feed, rest, err)
			}
		})
	}
}

// descending=true, as CouchDB serves it: the feed's rows newest first, each
// with the seq the forward feed gives it, since ignored, last_seq the last
// row's; with limit=1, the newest row and a last_seq to follow from; a
// continuous descending feed walks back and ends, as CouchDB's does.
func TestChangesDescending(t *testing.T) {
	f := newFixture(t)
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		if st, _, body := f.do("PUT", "/default/docs/"+k, "", `{"k":"`+k+`"}`); st != 201 {
			t.Fatalf("PUT %s: %d %s", k, st, body)
		}
	}
	if st, _, body := f.do("DELETE", "/default/docs/c", "", ""); st != 200 {
		t.Fatalf("DELETE: %d %s", st, body)
	}
	fwd := f.changes("include_docs=true")
	n := len(fwd.Results)
	desc := f.changes("descending=true&include_docs=true&since=" + url.QueryEscape(fwd.Results[2].Seq))
	if len(desc.Results) != n || desc.LastSeq != fwd.Results[0].Seq || desc.Pending != 0 {
		t.Fatalf("descending: %d rows, last_seq %s, pending %d; want %d, %s, 0", len(desc.Results), desc.LastSeq, desc.Pending, n, fwd.Results[0].Seq)
	}
	for i, r := range desc.Results {
		w := fwd.Results[n-1-i]
		if r.ID != w.ID || r.Seq != w.Seq || r.Deleted != w.Deleted || string(r.Doc) != string(w.Doc) {
			t.Errorf("descending row %d: %+v, want %+v", i, r, w)
		}
	}
	one := f.changes("descending=true&limit=1")
	if len(one.Results) != 1 || one.Results[0].ID != fwd.Results[n-1].ID || one.LastSeq != fwd.Results[n-1].Seq || one.Pending != n-1 {
		t.Fatalf("descending&limit=1: %+v, want the newest row, its seq as last_seq, pending %d", one, n-1)
	}
	st, _, body := f.do("GET", "/default/_changes?feed=continuous&descending=true", "", "")
	lines := strings.Split(strings.TrimSpace(body), "\n")
	if st != 200 || len(lines) != n+1 || !strings.Contains(lines[0], `"id":"`+fwd.Results[n-1].ID+`"`) || !strings.Contains(lines[n], `"last_seq":"`+fwd.Results[0].Seq+`"`) {
		t.Errorf("continuous descending: %d %q", st, body)
	}
}

// adminStream sends a GET of path as the administrator and returns the
// answer unread, for a feed read as it streams; ctx's end hangs up.
func (f *fixture) adminStream(ctx context.Context, t *testing.T, path string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", f.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(adminUser, adminPass)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// A change acknowledged from memory (durabilityMinLevel none, the flusher
// an hour away) and a deletion made by reading an expired document are in
// the feed asked for next, and since=now starts after them: the feed
// commits what waits for disk before it reads.
func TestChangesSeesWritesAcknowledgedFromMemory(t *testing.T) {
	f := newLevelFixture(t)
	form := "application/x-www-form-urlencoded"
	if st, _, body := f.do("POST", "/pools/default/buckets/default", form, "durabilityMinLevel=none"); st != 200 {
		t.Fatalf("durabilityMinLevel=none: %d %s", st, body)
	}
	if st, _, body := f.do("PUT", "/default/docs/gone?expiry=10", "application/json", `{"n":1}`); st != 201 && st != 200 {
		t.Fatalf("PUT gone: %d %s", st, body)
	}
	start := f.changes("since=now").LastSeq
	f.clk.Advance(11)
	if st, _, body := f.do("GET", "/default/docs/gone", "", ""); st != 404 {
		t.Fatalf("GET of the expired document: %d %s, want 404", st, body)
	}
	if st, _, body := f.do("PUT", "/default/docs/mem", "application/json", `{"n":2}`); st != 201 && st != 200 {
		t.Fatalf("PUT mem: %d %s", st, body)
	}
	if !f.queued("default") {
		t.Fatal("the write at none is on disk when answered: the test no longer shows what it means to")
	}
	got := map[string]bool{}
	for _, r := range f.changes("since=" + url.QueryEscape(start)).Results {
		got[r.ID] = r.Deleted
	}
	if len(got) != 2 || got["mem"] || !got["gone"] {
		t.Errorf("feed since the start: %v, want mem written and gone deleted", got)
	}
	if a := f.changes("since=now&feed=longpoll&timeout=0"); len(a.Results) != 0 {
		t.Errorf("since=now after them: %+v, want no rows", a.Results)
	}
}
