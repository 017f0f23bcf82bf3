package examples_test

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/httpapi"
	"github.com/mayflydb/mayfly/pager"
	"github.com/mayflydb/mayfly/views"
)

// startServer serves a fresh engine with a "default" bucket, views and the
// pager over HTTP, the administrator being Administrator / password as in
// the README.
func startServer(t *testing.T) *httptest.Server {
	t.Helper()
	ctx := context.Background()
	eng, err := engine.Open(t.TempDir(), &engine.Options{NumPartitions: 64})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	if _, err := eng.CreateBucket(ctx, engine.DefaultBucketSettings("default")); err != nil {
		t.Fatal(err)
	}
	vs, err := views.New(ctx, eng, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { vs.Close() })
	pm := pager.New(eng, nil)
	t.Cleanup(func() { pm.Close(ctx) })
	users, err := auth.Open(t.TempDir(), &auth.Options{AdminUser: "Administrator", AdminPassword: "password",
		Argon2: &auth.Argon2Params{Time: 1, Memory: 64, Threads: 1, KeyLen: 32}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(eng, &httpapi.Options{Views: vs, Pager: pm, Auth: users}))
	t.Cleanup(srv.Close)
	return srv
}

// readmeBlock returns the first ```sh block of the README after the line
// heading, as one command per string (continuation lines joined).
func readmeBlock(t *testing.T, heading string) []string {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	i := strings.Index(text, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("README has no %q", heading)
	}
	text = text[i:]
	start := strings.Index(text, "```sh\n")
	end := strings.Index(text[start+6:], "```")
	if start < 0 || end < 0 {
		t.Fatalf("no sh block after %q", heading)
	}
	var cmds []string
	cur := ""
	for _, line := range strings.Split(text[start+6:start+6+end], "\n") {
		if strings.HasSuffix(line, "\\") {
			cur += strings.TrimSuffix(line, "\\")
			continue
		}
		cur += line
		if strings.TrimSpace(cur) != "" {
			cmds = append(cmds, cur)
		}
		cur = ""
	}
	return cmds
}

// TestReadmeViews runs the README's view commands, in order, with curl
// against a real server holding game documents, one of them without a
// score: the example's answers must be what the README promises.
func TestReadmeViews(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed")
	}
	srv := startServer(t)
	host := strings.TrimPrefix(srv.URL, "http://")
	run := func(cmd string) string {
		t.Helper()
		cmd = strings.ReplaceAll(cmd, "localhost:8091", host)
		out, err := exec.Command("bash", "-c", "set -e; "+cmd+"; echo").CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", cmd, err, out)
		}
		return string(out)
	}
	for _, doc := range []string{
		`g1 -d '{"player":"ann","score":3}'`,
		`g2 -d '{"player":"bo","score":5}'`,
		`g3 -d '{"player":"ann","score":9}'`,
		`p1 -d '{"player":"cy","type":"profile"}'`, // no score
	} {
		run("curl -sS -u Administrator:password -X PUT localhost:8091/default/docs/" + doc)
	}
	cmds := readmeBlock(t, "## Views")
	if len(cmds) != 5 {
		t.Fatalf("README view commands: %q", cmds)
	}
	var outs []string
	for _, c := range cmds {
		outs = append(outs, run(strings.Replace(c, "curl ", "curl -sS ", 1)))
	}
	for i, want := range []string{
		`"ok":true`,
		`{"key":"ann","value":{"sum":12,"count":2,"min":3,"max":9,"sumsqr":90}},` + "\r\n" +
			`{"key":"bo","value":{"sum":5,"count":1,"min":5,"max":5,"sumsqr":25}}`,
		`{"id":"g1","key":"ann","value":3,"doc":{"meta":{"id":"g1",`,
		`{"id":"g2","key":"bo","value":5}`,
		`"reduce_errors":0`,
	} {
		if !strings.Contains(outs[i], want) || strings.Contains(outs[i], `"error"`) {
			t.Errorf("README command %d: %s\nanswered %s\nwant it to contain %s", i, cmds[i], outs[i], want)
		}
	}
}

// TestReadmeQueryErrors asks a real server each query of the README's "Bad
// query values" table and compares the answer with the README's.
func TestReadmeQueryErrors(t *testing.T) {
	srv := startServer(t)
	do := func(method, path, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth("Administrator", "password")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if st, body := do("PUT", "/default/_design/game", `{"views":{"score":{"map":"function (doc, meta) { if (doc.score !== undefined) emit(doc.player, doc.score); }","reduce":"_stats"}}}`); st != 201 {
		t.Fatalf("PUT ddoc: %d %s", st, body)
	}
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	i := strings.Index(text, "\n### Bad query values\n")
	if i < 0 {
		t.Fatal(`README has no "### Bad query values"`)
	}
	text = text[i:]
	text = text[:strings.Index(text, "\n## ")]
	n := 0
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.SplitN(strings.TrimPrefix(line, "| "), " | ", 2)
		query := strings.Trim(cells[0], "`")
		ans := cells[1]
		if strings.HasPrefix(ans, "`` ") {
			ans = ans[3:strings.Index(ans, " ``")]
		} else {
			ans = ans[1:]
			ans = ans[:strings.Index(ans, "`")]
		}
		var want, got map[string]string
		if err := json.Unmarshal([]byte(ans), &want); err != nil {
			t.Fatalf("README answer for %s is not JSON: %s", query, ans)
		}
		st, body := do("GET", "/default/_design/game/_view/score?"+query, "")
		if err := json.Unmarshal([]byte(body), &got); err != nil || st != 400 || !maps.Equal(got, want) {
			t.Errorf("%s: answered %d %s, the README says 400 %s", query, st, body, ans)
		}
		n++
	}
	if n < 5 {
		t.Fatalf("found %d examples in the README's table", n)
	}
}
