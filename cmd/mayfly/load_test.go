package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

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
	// Input from a standard input whose first line is not JSON is taken
	// for CSV, and the error says so and how to say otherwise.
	var out, errOut bytes.Buffer
	code := runWith(strings.NewReader("not json\n{\"_id\":\"ok1\"}\n"), []string{"load", "-", "--host", f.url, "-u", adminU}, &out, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), "taken for CSV") || !strings.Contains(errOut.String(), "--format ndjson") {
		t.Errorf("a guess of CSV that fails: %d %q %q", code, out.String(), errOut.String())
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

// CSV values that are JSON numbers stay numbers; anything else, including
// what Go's ParseFloat would take ("007", "Inf", "1_000", "0x10"), is text.
func TestIsJSONNumber(t *testing.T) {
	for _, c := range []struct {
		s    string
		want bool
	}{
		{"0", true}, {"-0", true}, {"36", true}, {"-3", true}, {"1.5", true}, {"1.5e2", true}, {"4E-7", true}, {"12345678901234567890", true},
		{"", false}, {"-", false}, {"007", false}, {"1.", false}, {".5", false}, {"1e", false}, {"+1", false}, {"Inf", false}, {"NaN", false},
		{"1_000", false}, {"0x10", false}, {" 1", false}, {"1 ", false}, {"1,5", false},
	} {
		if got := isJSONNumber(c.s); got != c.want {
			t.Errorf("isJSONNumber(%q) = %v", c.s, got)
		}
	}
}

// The format is told by the first significant byte when neither --format
// nor the extension says.
func TestSniffFormat(t *testing.T) {
	for in, want := range map[string]string{
		"[{\"_id\":1}]":         formatArray,
		"\n\n  [":               formatArray,
		"{\"_id\":1}\n":         formatNDJSON,
		"\xef\xbb\xbf{\"a\":1}": formatNDJSON,
		"id,name\n":             formatCSV,
		"\xef\xbb\xbfid,name\n": formatCSV,
		"":                      formatNDJSON,
	} {
		got, err := sniffFormat(bufio.NewReader(strings.NewReader(in)))
		if err != nil || got != want {
			t.Errorf("sniffFormat(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for name, want := range map[string]string{"a.csv": formatCSV, "a.CSV": formatCSV, "a.ndjson": formatNDJSON, "a.jsonl": formatNDJSON, "a.json": "", "-": ""} {
		if got := formatOf("", name); got != want {
			t.Errorf("formatOf(%q) = %q, want %q", name, got, want)
		}
	}
}

// With the bar on, stderr shows the documents loaded and their rate while
// the load runs. The input waits until the bar has shown the first hundred
// before it sends the rest.
func TestLoadProgressBar(t *testing.T) {
	f := cliServer(t)
	var errOut syncBuffer
	pr, pw := io.Pipe()
	shown := make(chan bool, 1)
	go func() {
		for i := range 100 {
			fmt.Fprintf(pw, `{"_id":"a%d"}`+"\n", i)
		}
		seen := false
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline) && !seen; time.Sleep(10 * time.Millisecond) { // polling the progress line; the deadline catches a hang
			seen = strings.Contains(errOut.String(), "100 docs, ")
		}
		shown <- seen
		for i := range 100 {
			fmt.Fprintf(pw, `{"_id":"b%d"}`+"\n", i)
		}
		pw.Close()
	}()
	var out bytes.Buffer
	code := runWith(pr, []string{"load", "-", "--batch", "10", "--progress", "always", "--host", f.url, "-u", adminU}, &out, &errOut)
	if !<-shown {
		t.Errorf("the bar never showed 100 documents loaded: %q", errOut.String())
	}
	if code != 0 || !strings.Contains(out.String(), "loaded 200 documents") || !strings.Contains(errOut.String(), "docs/s") {
		t.Fatalf("load: %d %q %q", code, out.String(), errOut.String())
	}
}

// A batch refused with 503 (the server at its most requests at once) is
// sent again after Retry-After; other refusals stop the load at once.
func TestLoadRetriesBusyServer(t *testing.T) {
	var calls atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("POST /default/_bulk", func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= 2 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `{"error":"too_many_requests","reason":"retry shortly"}`)
			return
		}
		sc := bufio.NewScanner(r.Body)
		for sc.Scan() {
			var op struct{ ID string }
			json.Unmarshal(sc.Bytes(), &op)
			fmt.Fprintf(w, `{"id":%q,"cas":1,"seq":1,"expiration":0}`+"\n", op.ID)
		}
	})
	mux.HandleFunc("POST /locked/_bulk", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, `{"error":"forbidden","reason":"no data_writer role on locked"}`)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	in := `{"_id":"a"}` + "\n" + `{"_id":"b"}` + "\n"
	var out, errOut bytes.Buffer
	if code := runWith(strings.NewReader(in), []string{"load", "-", "--host", srv.URL, "-u", adminU}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "loaded 2 documents") || calls.Load() != 3 {
		t.Fatalf("load against a busy server: %d %q %q, %d calls", code, out.String(), errOut.String(), calls.Load())
	}
	out.Reset()
	errOut.Reset()
	if code := runWith(strings.NewReader(in), []string{"load", "-", "-b", "locked", "--host", srv.URL, "-u", adminU}, &out, &errOut); code != 1 ||
		!strings.Contains(errOut.String(), "load stopped: no data_writer role on locked (forbidden)") {
		t.Fatalf("load refused: %d %q %q", code, out.String(), errOut.String())
	}
}

// A file that starts with a UTF-8 byte-order mark (Excel's "CSV UTF-8",
// Notepad's UTF-8) loads as one without: the mark is skipped whether the
// format comes from the extension, --format or the first byte.
func TestLoadSkipsByteOrderMark(t *testing.T) {
	f := cliServer(t)
	const bom = "\xef\xbb\xbf"
	for _, c := range []struct {
		name, content string
		args          []string
		key           string
	}{
		{"people.csv", bom + "id,name\nbom1,Ada\n", nil, "bom1"},
		{"people.txt", bom + "id,name\nbom2,Ada\n", []string{"--format", "csv"}, "bom2"},
		{"docs.ndjson", bom + `{"_id":"bom3","name":"Ada"}` + "\n", nil, "bom3"},
		{"docs.json", bom + `[{"_id":"bom4","name":"Ada"}]`, []string{"--format", "json"}, "bom4"},
	} {
		path := writeFile(t, c.name, c.content)
		r := f.mf("", append([]string{"load", path}, c.args...)...)
		if r.code != 0 || !strings.Contains(r.out, "loaded 1 documents") {
			t.Errorf("load of %s %v with a byte-order mark: %v", c.name, c.args, r)
			continue
		}
		if d := f.doc(t, "", c.key); !strings.Contains(string(d.Value), `"name":"Ada"`) {
			t.Errorf("%s stored as %s", c.key, d.Value)
		}
	}
}

// A CSV record that fails over several lines is named by all of them: an
// unclosed quote takes the rest of the input into its field, and the
// summary must not read as if only its first line was lost. A line cut
// short in NDJSON is not said to fail "at byte 0".
func TestLoadNamesEveryLineOfAFailedRecord(t *testing.T) {
	f := cliServer(t)
	path := writeFile(t, "cut.csv", "id,name\nq1,\"ok\"\nq2,\"unterminated\nq3,x\nq4,y\n")
	r := f.mf("", "load", path)
	if r.code != 1 || !strings.Contains(r.out, "loaded 1 documents") || !strings.Contains(r.errOut, "lines 3-5: ") {
		t.Errorf("load of a CSV file with an unclosed quote: %v", r)
	}
	path = writeFile(t, "cut.ndjson", "{\"_id\":\"m1\"}\n{\"_id\":\"m2\"\n{\"_id\":\"m3\"}\n")
	r = f.mf("", "load", path)
	if r.code != 1 || !strings.Contains(r.out, "loaded 2 documents") || !strings.Contains(r.errOut, "line 2: not valid JSON: unexpected end of JSON input\n") {
		t.Errorf("load of an NDJSON line cut short: %v", r)
	}
}

// An operation answered too_many_requests alone (a cluster node forwarding
// the line to a busy leader), or an upsert answered temporary_failure (its
// outcome unknown: a leader changed), is sent again, alone with the others
// of its kind; an insert whose outcome is unknown is not (sent again, it
// could fail for having been applied the first time), and an error that
// is no "retry" is not either.
func TestLoadRetriesBusyLines(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{} // the times each id was sent
	bodies := []string{}     // each request's lines
	mux := http.NewServeMux()
	mux.HandleFunc("POST /default/_bulk", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		bodies = append(bodies, string(body))
		for line := range strings.SplitSeq(strings.TrimSuffix(string(body), "\n"), "\n") {
			var op struct{ Op, ID string }
			json.Unmarshal([]byte(line), &op)
			seen[op.ID]++
			switch {
			case strings.HasPrefix(op.ID, "busy") && seen[op.ID] <= 2:
				fmt.Fprintf(w, `{"id":%q,"error":"too_many_requests","reason":"the server is answering its maximum of concurrent requests; retry shortly"}`+"\n", op.ID)
			case strings.HasPrefix(op.ID, "unknown") && seen[op.ID] == 1:
				fmt.Fprintf(w, `{"id":%q,"error":"temporary_failure","reason":"the write's outcome is unknown"}`+"\n", op.ID)
			case op.ID == "exists":
				fmt.Fprintf(w, `{"id":%q,"error":"key_exists","reason":"exists"}`+"\n", op.ID)
			default:
				fmt.Fprintf(w, `{"id":%q,"cas":1,"seq":1,"expiration":0}`+"\n", op.ID)
			}
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	in := `{"op":"upsert","id":"ok1","doc":{}}
{"op":"upsert","id":"busy1","doc":{"v":1}}
{"op":"insert","id":"busy2","doc":{"v":2}}
{"op":"upsert","id":"unknown1","doc":{}}
{"op":"insert","id":"unknown2","doc":{}}
{"op":"upsert","id":"exists","doc":{}}
`
	var out, errOut bytes.Buffer
	code := runWith(strings.NewReader(in), []string{"load", "-", "--host", srv.URL, "-u", adminU}, &out, &errOut)
	if code != 1 || !strings.Contains(out.String(), "loaded 4 documents") || !strings.Contains(out.String(), "2 failed") ||
		!strings.Contains(errOut.String(), "temporary_failure: 1") || !strings.Contains(errOut.String(), "unknown2") || !strings.Contains(errOut.String(), "key_exists: 1") {
		t.Fatalf("load: %d %q %q", code, out.String(), errOut.String())
	}
	mu.Lock()
	defer mu.Unlock()
	for id, want := range map[string]int{"ok1": 1, "busy1": 3, "busy2": 3, "unknown1": 2, "unknown2": 1, "exists": 1} {
		if seen[id] != want {
			t.Errorf("%s sent %d times, want %d", id, seen[id], want)
		}
	}
	// The lines sent again are sent as they were.
	if len(bodies) != 3 || bodies[2] != `{"op":"upsert","id":"busy1","doc":{"v":1}}`+"\n"+`{"op":"insert","id":"busy2","doc":{"v":2}}`+"\n" {
		t.Errorf("requests: %q", bodies)
	}
}
