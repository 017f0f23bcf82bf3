package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/httpapi"
	"github.com/mayflydb/mayfly/pager"
	"github.com/mayflydb/mayfly/views"
)

// t0 is the fake clock's start (Unix seconds).
const t0 = 1_700_000_000

// cliFixture is a whole server (documents, views, pager, users) over a fresh
// engine on a fake clock, with buckets "default" and "travel" and a
// collection app.people in default.
type cliFixture struct {
	url   string
	eng   *engine.Engine
	clock *engine.FakeClock
	def   *engine.Bucket
}

func cliServer(t *testing.T) *cliFixture {
	t.Helper()
	ctx := context.Background()
	clk := engine.NewFakeClock(t0)
	eng, err := engine.Open(t.TempDir(), &engine.Options{Clock: clk, NumPartitions: 8, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	def, err := eng.CreateBucket(ctx, engine.DefaultBucketSettings("default"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.CreateBucket(ctx, engine.DefaultBucketSettings("travel")); err != nil {
		t.Fatal(err)
	}
	if err := def.CreateScope(ctx, "app"); err != nil {
		t.Fatal(err)
	}
	if _, err := def.CreateCollection(ctx, "app", "people", 0); err != nil {
		t.Fatal(err)
	}
	vs, err := views.New(ctx, eng, nil)
	if err != nil {
		t.Fatal(err)
	}
	pm := pager.New(eng, nil)
	users, err := auth.Open(t.TempDir(), &auth.Options{AdminUser: adminUser, AdminPassword: adminPass,
		Argon2: &auth.Argon2Params{Time: 1, Memory: 64, Threads: 1, KeyLen: 32}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(eng, &httpapi.Options{Views: vs, Pager: pm, Auth: users}))
	t.Cleanup(func() {
		srv.Close()
		vs.Close()
		pm.Close(context.Background())
		eng.Close()
	})
	return &cliFixture{url: srv.URL, eng: eng, clock: clk, def: def}
}

// result is one run of the command line.
type result struct {
	code        int
	out, errOut string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d, stdout %q, stderr %q", r.code, r.out, r.errOut)
}

// mf runs mayfly with args, then --host and the administrator's credentials
// (so every call also has flags after its positional arguments).
func (f *cliFixture) mf(stdin string, args ...string) result {
	var out, errOut bytes.Buffer
	args = append(args, "--host", f.url, "-u", adminUser, "-p", adminPass)
	code := runWith(strings.NewReader(stdin), args, &out, &errOut)
	return result{code, out.String(), errOut.String()}
}

// doc reads a document of the default bucket's collection (scope.collection,
// "" for the default one).
func (f *cliFixture) doc(t *testing.T, coll, key string) *engine.Document {
	t.Helper()
	c := f.def.DefaultCollection()
	if coll != "" {
		scope, name, _ := strings.Cut(coll, ".")
		var err error
		if c, err = f.def.Collection(scope, name); err != nil {
			t.Fatal(err)
		}
	}
	d, err := c.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("get %s %s: %v", coll, key, err)
	}
	return d
}

// The example: flags after the positional arguments are flags.
func TestStatsFlagsAnywhere(t *testing.T) {
	f := cliServer(t)
	ctx := context.Background()
	travel, err := f.eng.Bucket("travel")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b"} {
		travel.DefaultCollection().Upsert(ctx, k, []byte(`{}`), nil)
	}
	f.def.DefaultCollection().Upsert(ctx, "x", []byte(`{}`), nil)
	for _, args := range [][]string{
		{"stats", "curr_items", "-b", "travel"},
		{"stats", "-b", "travel", "curr_items"},
		{"stats", "--bucket=travel", "curr_items"},
	} {
		if r := f.mf("", args...); r.code != 0 || r.out != " curr_items: 2\n" {
			t.Errorf("%v: %v", args, r)
		}
	}
	if r := f.mf("", "stats", "curr_items"); r.code != 0 || r.out != " curr_items: 1\n" {
		t.Errorf("stats of default: %v", r)
	}
	// Long flags with one dash, as the Go flag package took them.
	var out bytes.Buffer
	if code := run([]string{"stats", "-host", f.url, "-u", adminU, "-bucket", "travel", "curr_items"}, &out, io.Discard); code != 0 || out.String() != " curr_items: 2\n" {
		t.Errorf("-host and -bucket: %d %q", code, out.String())
	}
}

func TestVersion(t *testing.T) {
	a, b := runCmdResult("version"), runCmdResult("--version")
	if a.code != 0 || b.code != 0 || a.out != b.out {
		t.Fatalf("version: %v; --version: %v", a, b)
	}
	if !strings.HasPrefix(a.out, "mayfly ") || !strings.Contains(a.out, "\ngo "+strings.TrimPrefix(runtime.Version(), "go")+"\n") {
		t.Fatalf("version prints %q", a.out)
	}
}

func runCmdResult(args ...string) result {
	code, out, errOut := runCmd(args...)
	return result{code, out, errOut}
}

func TestDocumentCommands(t *testing.T) {
	f := cliServer(t)
	r := f.mf("", "put", "user::1", `{"name":"Ada"}`, "--expiry", "100")
	if r.code != 0 || !strings.Contains(r.out, `"id":"user::1"`) {
		t.Fatalf("put: %v", r)
	}
	if d := f.doc(t, "", "user::1"); d.Expiration != t0+100 || string(d.Value) != `{"name":"Ada"}` {
		t.Fatalf("stored %s expiring %d", d.Value, d.Expiration)
	}
	if r := f.mf("", "get", "user::1"); r.code != 0 || r.out != `{"name":"Ada"}`+"\n" {
		t.Fatalf("get: %v", r)
	}
	var env struct {
		Meta struct{ Expiration int64 }
		JSON map[string]string
	}
	r = f.mf("", "get", "--meta", "user::1")
	if err := json.Unmarshal([]byte(r.out), &env); r.code != 0 || err != nil || env.Meta.Expiration != t0+100 || env.JSON["name"] != "Ada" {
		t.Fatalf("get --meta: %v", r)
	}
	if r := f.mf("", "touch", "user::1", "--expiry", "5"); r.code != 0 {
		t.Fatalf("touch: %v", r)
	}
	if d := f.doc(t, "", "user::1"); d.Expiration != t0+5 {
		t.Fatalf("touch left expiration %d", d.Expiration)
	}
	// The value from standard input, into a collection; a key with a slash.
	r = f.mf(`{"name":"Bob"}`, "put", "--collection", "app.people", "p/2", "-")
	if r.code != 0 {
		t.Fatalf("put from stdin: %v", r)
	}
	if d := f.doc(t, "app.people", "p/2"); string(d.Value) != `{"name":"Bob"}` {
		t.Fatalf("stored %s", d.Value)
	}
	if r := f.mf("", "get", "p/2"); r.code != 1 || !strings.Contains(r.errOut, "not found") {
		t.Fatalf("the collection's document in the default collection: %v", r)
	}
	if r := f.mf("", "rm", "p/2", "--collection", "app.people"); r.code != 0 {
		t.Fatalf("rm: %v", r)
	}
	// Errors: the server's reason, no Go package prefix, exit 1.
	r = f.mf("", "get", "p/2", "--collection", "app.people")
	if r.code != 1 || !strings.HasPrefix(r.errOut, "mayfly get: ") || !strings.Contains(r.errOut, "not found") || strings.Contains(r.errOut, "engine:") {
		t.Fatalf("get after rm: %v", r)
	}
	if r := f.mf("", "put", "bad", `{"a":`); r.code != 1 || !strings.Contains(r.errOut, "not valid JSON") {
		t.Fatalf("put of broken JSON: %v", r)
	}
	if r := f.mf("", "put", "k", `{}`, "--op", "replace"); r.code != 1 || !strings.Contains(r.errOut, "not_found") {
		t.Fatalf("replace of a missing document: %v", r)
	}
	// Usage errors exit 2.
	for _, args := range [][]string{{"get"}, {"get", "a", "b"}, {"touch", "a"}, {"put", "a"}, {"rm", "--bogus", "a"}} {
		if r := f.mf("", args...); r.code != 2 || !strings.Contains(r.errOut, "--help") {
			t.Errorf("%v: %v", args, r)
		}
	}
}

// Credentials: -u USER -p PASSWORD, -u USER:PASSWORD, or the environment.
func TestCredentials(t *testing.T) {
	f := cliServer(t)
	t.Setenv("MAYFLY_USER", "")
	t.Setenv("MAYFLY_PASSWORD", "")
	try := func(args ...string) result {
		var out, errOut bytes.Buffer
		code := run(append([]string{"stats", "curr_items", "--host", f.url}, args...), &out, &errOut)
		return result{code, out.String(), errOut.String()}
	}
	for _, args := range [][]string{{"-u", adminUser, "-p", adminPass}, {"-u", adminU}, {"--user", adminUser, "--password", adminPass}} {
		if r := try(args...); r.code != 0 {
			t.Errorf("%v: %v", args, r)
		}
	}
	if r := try("-u", adminUser, "-p", "wrong"); r.code != 1 || !strings.Contains(r.errOut, "unauthorized") {
		t.Errorf("wrong password: %v", r)
	}
	if r := try(); r.code != 1 || !strings.Contains(r.errOut, "MAYFLY_USER") {
		t.Errorf("no credentials: %v", r)
	}
	t.Setenv("MAYFLY_USER", adminUser)
	t.Setenv("MAYFLY_PASSWORD", adminPass)
	if r := try(); r.code != 0 {
		t.Errorf("credentials from the environment: %v", r)
	}
	t.Setenv("MAYFLY_HOST", f.url)
	var out bytes.Buffer
	if code := run([]string{"stats", "curr_items"}, &out, io.Discard); code != 0 || out.String() != " curr_items: 0\n" {
		t.Errorf("MAYFLY_HOST: %d %q", code, out.String())
	}
}

// The client commands trust a private CA given with --cacert.
func TestCACert(t *testing.T) {
	certFile, keyFile, _ := selfSigned(t, t.TempDir())
	_, addr := doorServer(t, "--tls-cert", certFile, "--tls-key", keyFile)
	if code, out, errOut := runCmd("stats", "curr_items", "--host", "https://"+addr, "-u", adminU, "--cacert", certFile); code != 0 || out != " curr_items: 0\n" {
		t.Fatalf("stats with --cacert: %d %q %q", code, out, errOut)
	}
	if code, _, errOut := runCmd("stats", "--host", "https://"+addr, "-u", adminU); code != 1 || !strings.Contains(errOut, "--cacert") || strings.Contains(errOut, "x509:") {
		t.Fatalf("stats without --cacert: %d %q", code, errOut)
	}
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadNDJSON(t *testing.T) {
	f := cliServer(t)
	in := `{"_id":"a","n":1}
{"id":"b","n":2}

{"_id":"c", broken
{"n":3}
[1,2]
{"_id":"d","n":4}
{"_id":"e","doc":"` + strings.Repeat("x", 100) + `"}
`
	path := writeFile(t, "docs.ndjson", in)
	r := f.mf("", "load", path, "--expiry", "60", "--batch", "2")
	if r.code != 1 {
		t.Fatalf("load with bad lines: %v", r)
	}
	if !strings.Contains(r.out, "loaded 4 documents into default") || !strings.Contains(r.out, "3 failed") {
		t.Errorf("summary: %q", r.out)
	}
	for _, want := range []string{"invalid_json: 1", "line 4", "no_id: 1", "line 5", "not_an_object: 1", "line 6"} {
		if !strings.Contains(r.errOut, want) {
			t.Errorf("failure summary lacks %q: %q", want, r.errOut)
		}
	}
	if strings.Contains(r.errOut, "\r") {
		t.Errorf("a progress bar drawn on a stderr that is no terminal: %q", r.errOut)
	}
	for _, k := range []string{"a", "b", "d", "e"} {
		if d := f.doc(t, "", k); d.Expiration != t0+60 {
			t.Errorf("%s expires at %d", k, d.Expiration)
		}
	}
	if d := f.doc(t, "", "a"); string(d.Value) != `{"_id":"a","n":1}` {
		t.Errorf("a stored as %s", d.Value)
	}
	// A clean load exits 0; --id-field names the id; into a collection,
	// from standard input, with the bar forced on.
	r = f.mf(`{"email":"ada@x","age":36}`+"\n"+`{"email":"bob@x","age":4}`, "load", "-", "--id-field", "email", "--collection", "app.people", "--progress", "always")
	if r.code != 0 || !strings.Contains(r.out, "loaded 2 documents") {
		t.Fatalf("load from stdin: %v", r)
	}
	if d := f.doc(t, "app.people", "bob@x"); string(d.Value) != `{"email":"bob@x","age":4}` {
		t.Errorf("bob@x stored as %s", d.Value)
	}
	// A failure of the request as a whole stops the load with its reason.
	r = f.mf("", "load", path, "-b", "nope")
	if r.code != 1 || !strings.Contains(r.errOut, "load stopped") || !strings.Contains(r.errOut, `"nope"`) {
		t.Errorf("load into a missing bucket: %v", r)
	}
	if r := f.mf("", "load", filepath.Join(t.TempDir(), "missing.ndjson")); r.code != 1 || !strings.Contains(r.errOut, "missing.ndjson") {
		t.Errorf("load of a missing file: %v", r)
	}
	for _, args := range [][]string{{"load"}, {"load", path, "--concurrency", "0"}, {"load", path, "--format", "xml"}} {
		if r := f.mf("", args...); r.code != 2 {
			t.Errorf("%v: %v", args, r)
		}
	}
}

func TestLoadArray(t *testing.T) {
	f := cliServer(t)
	path := writeFile(t, "docs.json", `[
  {"_id": "a", "nested": {"x": [1, 2]}},
  {"id": 7, "n": 2},
  "not an object",
  {"n": 3}
]`)
	r := f.mf("", "load", path)
	if r.code != 1 || !strings.Contains(r.out, "loaded 2 documents") || !strings.Contains(r.out, "2 failed") ||
		!strings.Contains(r.errOut, "element 3") || !strings.Contains(r.errOut, "element 4") {
		t.Fatalf("load of an array: %v", r)
	}
	if d := f.doc(t, "", "a"); string(d.Value) != `{"_id":"a","nested":{"x":[1,2]}}` {
		t.Errorf("a stored as %s", d.Value)
	}
	f.doc(t, "", "7") // a numeric id is the number's text
	// An array broken in the middle: what came before is loaded, the rest
	// cannot be read, and the exit code says so.
	r = f.mf(`[{"_id":"p"},{"_id":"q"} {"_id":"r"}]`, "load", "-")
	if r.code != 1 || !strings.Contains(r.out, "loaded 2 documents") || !strings.Contains(r.errOut, "the rest of the input was not read") {
		t.Fatalf("load of a broken array: %v", r)
	}
}

func TestLoadCSV(t *testing.T) {
	f := cliServer(t)
	path := writeFile(t, "people.csv", "name,id,age,zip,score\nAda,k1,36,007,1.5e2\nBob,k2,x,12,-3\nCy,k3\nDe\"e,k4,1,2,3\nEve,,1,2,3\nFay,k6,1,2,3\n")
	r := f.mf("", "load", path)
	if r.code != 1 || !strings.Contains(r.out, "loaded 3 documents") || !strings.Contains(r.out, "3 failed") {
		t.Fatalf("load of a CSV file: %v", r)
	}
	if !strings.Contains(r.errOut, "bad_csv: 2") || !strings.Contains(r.errOut, "no_id: 1") || !strings.Contains(r.errOut, "line 4") {
		t.Errorf("failure summary: %q", r.errOut)
	}
	if d := f.doc(t, "", "k1"); string(d.Value) != `{"name":"Ada","age":36,"zip":"007","score":1.5e2}` {
		t.Errorf("k1 stored as %s", d.Value)
	}
	if d := f.doc(t, "", "k2"); string(d.Value) != `{"name":"Bob","age":"x","zip":12,"score":-3}` {
		t.Errorf("k2 stored as %s", d.Value)
	}
	f.doc(t, "", "k6")
	// --key-column; a header without it is refused at once.
	path = writeFile(t, "mail.csv", "email,n\nz@x,1\n")
	if r := f.mf("", "load", path, "--key-column", "email"); r.code != 0 {
		t.Fatalf("--key-column: %v", r)
	}
	if d := f.doc(t, "", "z@x"); string(d.Value) != `{"n":1}` {
		t.Errorf("z@x stored as %s", d.Value)
	}
	if r := f.mf("", "load", path); r.code != 1 || !strings.Contains(r.errOut, `no "id" column`) {
		t.Errorf("a header without the key column: %v", r)
	}
}

// A load streams: documents made on the fly by a reader that never holds
// more than one line are all loaded.
func TestLoadStreams(t *testing.T) {
	f := cliServer(t)
	const n = 20000
	pr, pw := io.Pipe()
	go func() {
		for i := range n {
			fmt.Fprintf(pw, `{"_id":"s%d","i":%d}`+"\n", i, i)
		}
		pw.Close()
	}()
	var out, errOut bytes.Buffer
	code := runWith(pr, []string{"load", "-", "--host", f.url, "-u", adminU, "--batch", "500", "--concurrency", "3"}, &out, &errOut)
	if code != 0 || !strings.Contains(out.String(), fmt.Sprintf("loaded %d documents", n)) {
		t.Fatalf("streamed load: %d %q %q", code, out.String(), errOut.String())
	}
	if d := f.doc(t, "", fmt.Sprintf("s%d", n-1)); string(d.Value) != fmt.Sprintf(`{"_id":"s%d","i":%d}`, n-1, n-1) {
		t.Fatalf("last document: %s", d.Value)
	}
}

const scoresDDoc = `{"views":{
 "by_player":{"map":"function (doc, meta) { if (doc.type === 'score') emit(doc.player, doc.score); }","reduce":"_sum"},
 "by_level":{"map":"function (doc, meta) { if (doc.type === 'score') emit([doc.level, doc.player], doc.score); }","reduce":"_count"}}}`

const scoresNDJSON = `{"_id":"s1","type":"score","player":"ann","level":1,"score":120}
{"_id":"s2","type":"score","player":"bo","level":1,"score":80}
{"_id":"s3","type":"score","player":"ann","level":2,"score":30}
`

func TestDesignDocRoundTrip(t *testing.T) {
	f := cliServer(t)
	path := writeFile(t, "scores.json", scoresDDoc)
	if r := f.mf("", "ddoc", "put", "scores", path); r.code != 0 || r.out != "stored _design/scores\n" {
		t.Fatalf("ddoc put: %v", r)
	}
	if r := f.mf(`{"views":{"all":{"map":"function (d, m) { emit(m.id, null); }"}}}`, "ddoc", "put", "dev_all", "-"); r.code != 0 {
		t.Fatalf("ddoc put from stdin: %v", r)
	}
	r := f.mf("", "ddoc", "get", "_design/scores")
	var got, want any
	json.Unmarshal([]byte(scoresDDoc), &want)
	if err := json.Unmarshal([]byte(r.out), &got); r.code != 0 || err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("ddoc get: %v", r)
	}
	r = f.mf("", "ddoc", "ls")
	if r.code != 0 || !strings.Contains(r.out, "by_level (reduce _count), by_player (reduce _sum)\n") || !strings.Contains(r.out, "dev_all") {
		t.Fatalf("ddoc ls: %v", r)
	}
	if r := f.mf("", "ddoc", "ls", "--json"); r.code != 0 || !strings.Contains(r.out, `"_design/dev_all"`) {
		t.Fatalf("ddoc ls --json: %v", r)
	}
	if r := f.mf("", "ddoc", "put", "broken", "-"); r.code != 1 || !strings.Contains(r.errOut, "mayfly ddoc put: ") {
		t.Fatalf("ddoc put of nothing: %v", r)
	}
	for _, name := range []string{"scores", "dev_all"} {
		if r := f.mf("", "ddoc", "rm", name); r.code != 0 || r.out != "deleted _design/"+name+"\n" {
			t.Fatalf("ddoc rm %s: %v", name, r)
		}
	}
	if r := f.mf("", "ddoc", "ls"); r.code != 0 || r.out != "no design documents in default\n" {
		t.Fatalf("ddoc ls after rm: %v", r)
	}
	if r := f.mf("", "ddoc", "get", "scores"); r.code != 1 || !strings.Contains(r.errOut, "not_found") {
		t.Fatalf("ddoc get after rm: %v", r)
	}
	for _, args := range [][]string{{"ddoc"}, {"ddoc", "frob"}, {"ddoc", "get"}, {"ddoc", "put", "x"}} {
		if r := f.mf("", args...); r.code != 2 {
			t.Errorf("%v: %v", args, r)
		}
	}
}

func TestQuery(t *testing.T) {
	f := cliServer(t)
	if r := f.mf(scoresDDoc, "ddoc", "put", "scores", "-"); r.code != 0 {
		t.Fatal(r)
	}
	if r := f.mf(scoresNDJSON, "load", "-"); r.code != 0 {
		t.Fatal(r)
	}
	// The first query waits for the index (a bar may show, then clears).
	r := f.mf("", "query", "scores/by_player", "--stale=false", "--reduce=false", "--progress", "always")
	want := "KEY    VALUE  ID\n" +
		`"ann"  120    s1` + "\n" +
		`"ann"  30     s3` + "\n" +
		`"bo"   80     s2` + "\n" +
		"3 rows (total_rows 3)\n"
	if r.code != 0 || r.out != want {
		t.Fatalf("query table:\n%s\nwant\n%s\n(%v)", r.out, want, r)
	}
	// Flags before and after the positional argument; a key that is not
	// JSON is taken as a string.
	if r := f.mf("", "query", "--group", "scores/by_player", "--key", "ann"); r.code != 0 || r.out != "KEY    VALUE\n\"ann\"  150\n1 rows\n" {
		t.Errorf("--group --key ann: %v", r)
	}
	if r := f.mf("", "query", "scores/by_level", "--group-level", "1"); r.code != 0 || r.out != "KEY  VALUE\n[1]  2\n[2]  1\n2 rows\n" {
		t.Errorf("--group-level 1: %v", r)
	}
	if r := f.mf("", "query", "scores/by_player", "--keys", `["bo","zed"]`, "--reduce=false"); r.code != 0 || r.out != "KEY   VALUE  ID\n\"bo\"  80     s2\n1 rows (total_rows 3)\n" {
		t.Errorf("--keys: %v", r)
	}
	r = f.mf("", "query", "scores/by_player", "--reduce=false", "--descending", "--limit", "1", "--skip", "1", "--json")
	var ans struct {
		TotalRows int `json:"total_rows"`
		Rows      []struct {
			ID    string `json:"id"`
			Value int    `json:"value"`
		} `json:"rows"`
	}
	if err := json.Unmarshal([]byte(r.out), &ans); r.code != 0 || err != nil || len(ans.Rows) != 1 || ans.Rows[0].ID != "s3" || ans.TotalRows != 3 {
		t.Errorf("--json: %v", r)
	}
	// include_docs: a document that has expired but is not purged yet shows
	// as null.
	if r := f.mf("", "touch", "s2", "--expiry", "10"); r.code != 0 {
		t.Fatal(r)
	}
	f.clock.Advance(20)
	r = f.mf("", "query", "scores/by_player", "--reduce=false", "--include-docs", "--startkey", `"bo"`, "--stale=false")
	if r.code != 0 || !strings.Contains(r.out, "DOC") || !strings.Contains(r.out, "s2  null") {
		t.Errorf("--include-docs with an expired document: %v", r)
	}
	// Errors and usage.
	if r := f.mf("", "query", "scores/nope"); r.code != 1 || !strings.Contains(r.errOut, "nope") {
		t.Errorf("a missing view: %v", r)
	}
	if r := f.mf("", "query", "scores/by_player", "--stale", "sometimes"); r.code != 1 || !strings.Contains(r.errOut, "stale") {
		t.Errorf("a bad stale value: %v", r)
	}
	for _, args := range [][]string{{"query"}, {"query", "scores"}, {"query", "scores/by_player", "--limit", "-1"}, {"query", "scores/by_player", "--keys", "ann"}} {
		if r := f.mf("", args...); r.code != 2 {
			t.Errorf("%v: %v", args, r)
		}
	}
}

func TestPagerRun(t *testing.T) {
	f := cliServer(t)
	if r := f.mf(`{"_id":"a"}`+"\n"+`{"_id":"b"}`, "load", "-", "--expiry", "10"); r.code != 0 {
		t.Fatal(r)
	}
	if r := f.mf("", "pager", "run"); r.code != 0 || !strings.HasPrefix(r.out, "purged 0 expired documents from default") {
		t.Fatalf("pager run before expiry: %v", r)
	}
	f.clock.Advance(11)
	if r := f.mf("", "pager", "run"); r.code != 0 || !strings.HasPrefix(r.out, "purged 2 expired documents from default") {
		t.Fatalf("pager run after expiry: %v", r)
	}
	if r := f.mf("", "pager", "run", "-b", "nope"); r.code != 1 || !strings.Contains(r.errOut, "nope") {
		t.Fatalf("pager run on a missing bucket: %v", r)
	}
	if r := f.mf("", "pager"); r.code != 2 {
		t.Fatalf("pager alone: %v", r)
	}
}

// A negative number is an argument, not a flag.
func TestCtlNegativeValue(t *testing.T) {
	f := cliServer(t)
	if r := f.mf("", "ctl", "set", "flush_param", "exp_pager_initial_run_time", "-1", "-b", "travel"); r.code != 0 || !strings.Contains(r.out, "set exp_pager_initial_run_time to -1") {
		t.Fatalf("ctl set ... -1: %v", r)
	}
	if r := f.mf("", "ctl", "get", "flush_param", "exp_pager_initial_run_time", "-b", "travel"); r.code != 0 || r.out != "exp_pager_initial_run_time -1\n" {
		t.Fatalf("ctl get: %v", r)
	}
}

func TestCompletion(t *testing.T) {
	r := runCmdResult("completion", "bash")
	if r.code != 0 || !strings.Contains(r.out, "__start_mayfly") {
		t.Fatalf("completion bash: %v", r)
	}
	for _, shell := range []string{"zsh", "fish", "powershell"} {
		if r := runCmdResult("completion", shell); r.code != 0 || r.out == "" {
			t.Errorf("completion %s: %v", shell, r)
		}
	}
	// What the shell asks while completing: commands, sub-commands, flag
	// values, flags.
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"__complete", "q"}, []string{"query"}},
		{[]string{"__complete", "ddoc", ""}, []string{"put", "get", "rm", "ls"}},
		{[]string{"__complete", "ctl", ""}, []string{"set", "get"}},
		{[]string{"__complete", "load", "--format", ""}, []string{"ndjson", "json", "csv"}},
		{[]string{"__complete", "query", "--st"}, []string{"--stale", "--startkey"}},
	} {
		r := runCmdResult(c.args...)
		for _, w := range c.want {
			if r.code != 0 || !strings.Contains(r.out, w+"\n") && !strings.Contains(r.out, w+"\t") {
				t.Errorf("%v: %v lacks %q", c.args, r, w)
			}
		}
	}
}

func TestHelpListsCommands(t *testing.T) {
	r := runCmdResult("--help")
	for _, c := range []string{"serve", "load", "get", "put", "rm", "touch", "query", "ddoc", "pager", "ctl", "stats", "search", "audit", "version", "completion"} {
		if r.code != 0 || !strings.Contains(r.out, "\n  "+c+" ") {
			t.Errorf("--help does not list %s: %v", c, r)
		}
	}
	if r := runCmdResult(); r.code != 2 || !strings.Contains(r.errOut, "Available Commands") {
		t.Errorf("no command: %v", r)
	}
	if r := runCmdResult("load", "--help"); r.code != 0 || !strings.Contains(r.out, "--key-column") || !strings.Contains(r.out, "--concurrency") {
		t.Errorf("load --help: %v", r)
	}
}
