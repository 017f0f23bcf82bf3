package httpapi_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestViewsOverHTTP(t *testing.T) {
	f := newFixture(t)
	js := "application/json"
	ddoc := `{"views":{"score":{"map":"function (doc, meta) { if (doc.score !== undefined) emit(doc.player, doc.score); }","reduce":"_sum"}}}`
	if st, _, body := f.do("PUT", "/default/_design/game", js, ddoc); st != 201 || jsonOf(t, body)["id"] != "_design/game" {
		t.Fatalf("PUT ddoc: %d %s", st, body)
	}
	st, h, body := f.do("GET", "/default/_design/game", "", "")
	if st != 200 || body != ddoc || !strings.Contains(h.Get("X-Couchbase-Meta"), `"_design/game"`) {
		t.Fatalf("GET ddoc: %d %s %v", st, body, h)
	}
	if st, _, body := f.do("PUT", "/default/_design/broken", js, `{"views":{"v":{"map":"function (doc) { emit(doc.x }"}}}`); st != 400 ||
		jsonOf(t, body)["error"] != "invalid_design_document" || !strings.Contains(body, "view v") || !strings.Contains(body, "line 1") {
		t.Fatalf("bad ddoc: %d %s", st, body)
	}
	f.do("PUT", "/default/docs/p1", "", `{"player":"ann","score":10}`)
	f.do("PUT", "/default/docs/p2?expiry=60", "", `{"player":"bo","score":20}`)
	f.clk.Advance(61)
	st, _, body = f.do("GET", "/default/_design/game/_view/score?stale=false&reduce=false&include_docs=true", "", "")
	if st != 200 || !strings.Contains(body, `{"id":"p2","key":"bo","value":20,"doc":null}`) || !strings.Contains(body, `"json":{"player":"ann","score":10}`) {
		t.Fatalf("include_docs with an expired doc: %d %s", st, body)
	}
	if _, _, body = f.do("GET", "/default/_design/game/_view/score?stale=false", "", ""); !strings.Contains(body, `"value":30`) {
		t.Fatalf("reduce keeps the expired, unpurged doc: %s", body)
	}
	if _, _, body = f.do("POST", "/default/_design/game/_view/score?reduce=false", js, `{"keys":["bo"]}`); !strings.Contains(body, `"id":"p2"`) || strings.Contains(body, `"p1"`) {
		t.Fatalf("POST keys: %s", body)
	}
	for _, c := range []struct {
		path, code string
		status     int
	}{
		{"/default/_design/game/_view/score?limit=-1", "query_parse_error", 400},
		{"/default/_design/game/_view/score?startkey=nope", "bad_request", 400},
		{"/default/_design/game/_view/score?include_docs=true", "query_parse_error", 400},
		{"/default/_design/game/_view/nope", "not_found", 404},
		{"/default/_design/nope/_view/score", "not_found", 404},
		{"/nobucket/_design/game/_view/score", "not_found", 404},
	} {
		if st, _, body := f.do("GET", c.path, "", ""); st != c.status || jsonOf(t, body)["error"] != c.code || jsonOf(t, body)["reason"] == "" {
			t.Errorf("%s: %d %s, want %d %s", c.path, st, body, c.status, c.code)
		}
	}
	if st, _, body := f.do("GET", "/default/_design/game/_info", "", ""); st != 200 || !strings.Contains(body, `"score"`) {
		t.Fatalf("_info: %d %s", st, body)
	}
	if _, _, body := f.do("GET", "/pools/default/buckets/default/ddocs", "", ""); !strings.Contains(body, `"id":"_design/game"`) {
		t.Fatalf("ddocs: %s", body)
	}
	if st, _, _ := f.do("DELETE", "/default/_design/game", "", ""); st != 200 {
		t.Fatalf("DELETE ddoc: %d", st)
	}
	if st, _, _ := f.do("GET", "/default/_design/game", "", ""); st != 404 {
		t.Fatalf("GET deleted ddoc: %d", st)
	}
}

// TestClientHangsUpMidStream: a client that reads a little of a large answer
// and hangs up leaves the server and the index unharmed.
func TestClientHangsUpMidStream(t *testing.T) {
	f := newFixture(t)
	f.do("PUT", "/default/_design/d", "application/json", `{"views":{"v":{"map":"function (doc, meta) { for (var i = 0; i < 50; i++) emit([meta.id, i], 'some value to make the answer long'); }"}}}`)
	for i := range 200 {
		f.do("PUT", fmt.Sprintf("/default/docs/k%03d", i), "", `{}`)
	}
	f.do("GET", "/default/_design/d/_view/v?stale=false&limit=1", "", "")
	for range 5 {
		conn, err := net.Dial("tcp", strings.TrimPrefix(f.srv.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "GET /default/_design/d/_view/v HTTP/1.1\r\nHost: %s\r\nAuthorization: Basic %s\r\n\r\n",
			strings.TrimPrefix(f.srv.URL, "http://"), base64.StdEncoding.EncodeToString([]byte(adminUser+":"+adminPass)))
		conn.SetReadDeadline(time.Now().Add(time.Minute))
		line, err := bufio.NewReader(conn).ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "HTTP/1.1 200") {
			t.Fatalf("status line %q: %v", line, err)
		}
		conn.Close()
	}
	st, _, body := f.do("GET", "/default/_design/d/_view/v?limit=2", "", "")
	if st != 200 || !strings.Contains(body, `"total_rows":10000`) {
		t.Fatalf("after hang-ups: %d %.200s", st, body)
	}
}

// TestViewErrorsBeforeAndDuringTheAnswer: a reduce that fails before any row
// is an error status; a key the index cannot handle is a 400.
func TestViewErrorsBeforeAndDuringTheAnswer(t *testing.T) {
	f := newFixture(t)
	f.do("PUT", "/default/_design/d", "application/json", `{"views":{"s":{"map":"function (doc, meta) { emit(meta.id, doc.v); }","reduce":"_sum"}}}`)
	f.do("PUT", "/default/docs/a", "", `{"v":"not a number"}`)
	st, h, body := f.do("GET", "/default/_design/d/_view/s?stale=false", "", "")
	want := "Reducer: Error building index for view `s`, reason: Value is not a number (key \"a\")"
	if st != 500 || jsonOf(t, body)["error"] != "error" || jsonOf(t, body)["reason"] != want || h.Get("Content-Type") != "application/json" {
		t.Fatalf("reduce over a string: %d %s", st, body)
	}
	deep := strings.Repeat("[", 5000) + strings.Repeat("]", 5000)
	st, _, body = f.do("GET", "/default/_design/d/_view/s?reduce=false&startkey="+deep, "", "")
	if st != 400 || jsonOf(t, body)["error"] != "bad_request" || !strings.Contains(jsonOf(t, body)["reason"].(string), "invalid key") {
		t.Fatalf("a key nested 5000 deep: %d %s", st, body)
	}
	if st, _, _ := f.do("GET", "/default/_design/d/_view/s?reduce=false", "", ""); st != 200 {
		t.Fatalf("the view still answers: %d", st)
	}
}

// Every change of a design document gives it a new revision, "N-<hash>" with
// N counting the changes, in X-Couchbase-Meta and in the ddocs list.
func TestDesignDocRevisionChanges(t *testing.T) {
	f := newFixture(t)
	js := "application/json"
	rev := func() string {
		t.Helper()
		st, h, body := f.do("GET", "/default/_design/r", "", "")
		var meta map[string]string
		if st != 200 || json.Unmarshal([]byte(h.Get("X-Couchbase-Meta")), &meta) != nil || meta["id"] != "_design/r" || meta["type"] != "json" {
			t.Fatalf("GET ddoc: %d %s %v", st, body, h)
		}
		st, _, list := f.do("GET", "/pools/default/buckets/default/ddocs", "", "")
		if st != 200 || !strings.Contains(list, `"rev":"`+meta["rev"]+`"`) {
			t.Errorf("ddocs list: %d %s, want rev %s", st, list, meta["rev"])
		}
		return meta["rev"]
	}
	bodies := []string{
		`{"views":{"v":{"map":"function (doc) { emit(doc.a); }"}}}`,
		`{"views":{"v":{"map":"function (doc) { emit(doc.b); }"}}}`,
		`{"views":{"v":{"map":"function (doc) { emit(doc.b); }"}},"note":"same functions"}`,
		`{"views":{"v":{"map":"function (doc) { emit(doc.b); }"}},"note":"same functions"}`, // the same body again
	}
	seen := map[string]bool{}
	for i, b := range bodies {
		if st, _, body := f.do("PUT", "/default/_design/r", js, b); st != 201 {
			t.Fatalf("PUT %d: %d %s", i, st, body)
		}
		r := rev()
		if !strings.HasPrefix(r, fmt.Sprintf("%d-", i+1)) || len(r) != len("1-")+8 || seen[r] {
			t.Errorf("PUT %d: rev %q, want %d-<8 hex digits>, new", i, r, i+1)
		}
		seen[r] = true
	}
	// Deleting counts too: created again, it goes on.
	if st, _, body := f.do("DELETE", "/default/_design/r", "", ""); st != 200 {
		t.Fatalf("DELETE: %d %s", st, body)
	}
	if st, _, body := f.do("PUT", "/default/_design/r", js, bodies[0]); st != 201 {
		t.Fatalf("PUT again: %d %s", st, body)
	}
	if r := rev(); !strings.HasPrefix(r, "6-") {
		t.Errorf("after delete and create: rev %q, want 6-...", r)
	}
}

// TestViewQueriesAcrossReplacements: view queries over HTTP while their
// design document is replaced (the same view, another map function) are
// answered 200, each whole from one version's index, never 503; once a
// replacement drops the view, a query of it is Couchbase's 404.
func TestViewQueriesAcrossReplacements(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	const n, versions = 100, 6
	coll := f.mustBucket("default").DefaultCollection()
	for i := range n {
		if _, err := coll.Upsert(ctx, fmt.Sprintf("k%03d", i), fmt.Appendf(nil, `{"n":%d}`, i), nil); err != nil {
			t.Fatal(err)
		}
	}
	ddoc := func(r int) string {
		return fmt.Sprintf(`{"views":{"v":{"map":"function (doc, meta) { emit(doc.n, %d); }"}}}`, r)
	}
	if st, _, body := f.do("PUT", "/default/_design/d", "application/json", ddoc(0)); st != 201 {
		t.Fatalf("PUT: %d %s", st, body)
	}
	get := func(path string) (int, string, error) {
		req, err := http.NewRequest("GET", f.srv.URL+path, nil)
		if err != nil {
			return 0, "", err
		}
		req.SetBasicAuth(adminUser, adminPass)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	stop := make(chan struct{})
	completed := make(chan struct{}, 1)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	for _, stale := range []string{"false", "false", "ok"} {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				st, body, err := get("/default/_design/d/_view/v?stale=" + stale)
				if err == nil && st != 200 {
					err = fmt.Errorf("%d %.200s", st, body)
				}
				var a struct {
					Rows []struct {
						Key, Value int
					}
					Errors []any
				}
				if err == nil {
					err = json.Unmarshal([]byte(body), &a)
				}
				if err == nil && (a.Errors != nil || stale == "false" && len(a.Rows) != n) {
					err = fmt.Errorf("%d rows: %.200s", len(a.Rows), body)
				}
				for i, r := range a.Rows {
					if err == nil && (r.Value != a.Rows[0].Value || stale == "false" && r.Key != i) {
						err = fmt.Errorf("row %d %+v after a row of version %d", i, r, a.Rows[0].Value)
					}
				}
				if err != nil {
					mu.Lock()
					if len(failures) < 10 {
						failures = append(failures, "stale="+stale+": "+err.Error())
					}
					mu.Unlock()
				} else if stale == "false" {
					select {
					case completed <- struct{}{}:
					default:
					}
				}
			}
		})
	}
	for r := 1; r <= versions; r++ {
		if st, _, body := f.do("PUT", "/default/_design/d", "application/json", ddoc(r)); st != 201 {
			t.Errorf("PUT %d: %d %s", r, st, body)
		}
		select { // queries span replacements without being outrun by them
		case <-completed:
		case <-time.After(2 * time.Minute):
			t.Fatalf("no complete answer in 2 minutes after replacement %d", r)
		}
	}
	close(stop)
	wg.Wait()
	for _, fl := range failures {
		t.Error(fl)
	}
	if st, _, body := f.do("PUT", "/default/_design/d", "application/json", `{"views":{"w":{"map":"function (doc, meta) { emit(doc.n, null); }"}}}`); st != 201 {
		t.Fatalf("PUT without v: %d %s", st, body)
	}
	st, _, body := f.do("GET", "/default/_design/d/_view/v?stale=false", "", "")
	if want := "View `v` not defined in local design document `_design/d`."; st != 404 || jsonOf(t, body)["error"] != "not_found" || jsonOf(t, body)["reason"] != want {
		t.Fatalf("a dropped view: %d %s, want 404 not_found %q", st, body, want)
	}
}
