package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/httpapi"
	"github.com/mayflydb/mayfly/internal/racebuild"
)

const ndjson = "application/x-ndjson"

// bulkLines posts body to /default/_bulk and decodes the answer lines.
func (f *fixture) bulkLines(body string) []map[string]any {
	f.t.Helper()
	st, h, out := f.do("POST", "/default/_bulk", ndjson, body)
	if st != 200 || h.Get("Content-Type") != ndjson {
		f.t.Fatalf("bulk: %d %s %s", st, h.Get("Content-Type"), out)
	}
	var res []map[string]any
	for line := range strings.SplitSeq(strings.TrimSuffix(out, "\n"), "\n") {
		if line == "" {
			continue
		}
		res = append(res, jsonOf(f.t, line))
	}
	return res
}

func TestBulkOrderAndBadLines(t *testing.T) {
	f := newFixture(t)
	var in strings.Builder
	const n = 1000
	for i := range n {
		switch {
		case i == 10:
			in.WriteString("not json\n")
		case i == 20:
			in.WriteString(`{"op":"frob","id":"x"}` + "\n")
		case i == 30:
			in.WriteString(`{"op":"upsert","doc":{}}` + "\n")
		case i == 40:
			in.WriteString(`{"op":"upsert","id":"k1","doc":{},"expiry":5,"typo":1}` + "\n")
		case i == 50:
			in.WriteString("\n") // blank: no answer
		default:
			fmt.Fprintf(&in, `{"op":"upsert","id":"k%d","doc":{"i":%d}}`+"\n", i, i)
		}
	}
	in.WriteString(`{"op":"insert","id":"k1","doc":{}}` + "\n")                // exists
	in.WriteString(`{"op":"replace","id":"zz","doc":{}}` + "\n")               // missing
	in.WriteString(`{"op":"delete","id":"k2","cas":1}` + "\n")                 // cas mismatch
	in.WriteString(`{"op":"delete","id":"k3"}` + "\n")                         // ok
	in.WriteString(`{"op":"touch","id":"k4"}` + "\n")                          // no expiry
	in.WriteString(`{"op":"upsert","id":"k5","collection":"no.such","doc":1}`) // no final newline
	res := f.bulkLines(in.String())
	if len(res) != n-1+6 {
		t.Fatalf("%d answers", len(res))
	}
	j := 0
	for i := range n {
		if i == 50 {
			continue
		}
		m := res[j]
		j++
		switch i {
		case 10, 20, 30, 40:
			if m["error"] != "bad_request" || m["id"] != nil && i != 20 {
				t.Errorf("line %d: %v", i+1, m)
			}
			if i != 20 && m["line"] != float64(i+1) {
				t.Errorf("line %d: %v", i+1, m)
			}
		default:
			if m["id"] != fmt.Sprintf("k%d", i) || m["error"] != nil || m["cas"] == nil || m["seq"] == nil {
				t.Fatalf("line %d: %v", i+1, m)
			}
		}
	}
	want := []string{"key_exists", "not_found", "cas_mismatch", "", "bad_request", "not_found"}
	for i, code := range want {
		m := res[j+i]
		if code == "" && m["error"] != nil || code != "" && m["error"] != code {
			t.Errorf("tail %d: %v, want %q", i, m, code)
		}
	}
	if st, _, _ := f.do("GET", "/default/docs/k999", "", ""); st != 200 {
		t.Errorf("k999: %d", st)
	}
	if st, _, _ := f.do("GET", "/default/docs/k3", "", ""); st != 404 {
		t.Errorf("k3 deleted: %d", st)
	}
}

// TestBulkExpiryLikeSingleWrites: the same operation through PUT and through
// _bulk gives the same expiration.
func TestBulkExpiryLikeSingleWrites(t *testing.T) {
	f := newFixture(t)
	f.do("POST", "/pools/default/buckets/default/scopes", formCT, "name=s")
	f.do("POST", "/pools/default/buckets/default/scopes/s/collections", formCT, "name=c&defaultTTL=60&maxTTL=1000")
	cases := []struct {
		query string // of the PUT
		op    string // the same in a bulk line, without id
		doc   string
	}{
		{"", `"op":"upsert"`, `{"v":1}`},
		{"expiry=100", `"op":"upsert","expiry":100`, `{"v":1}`},
		{"expiry=2000000000", `"op":"upsert","expiry":2000000000`, `{"v":1}`},
		{"collection=s.c", `"op":"upsert","collection":"s.c"`, `{"v":1}`},
		{"collection=s.c", `"op":"upsert","collection":"s.c"`, `{"ttl":10}`},
		{"collection=s.c&expiry=5000", `"op":"upsert","collection":"s.c","expiry":5000`, `{"v":1}`},
		{"collection=s.c&expiry=500", `"op":"upsert","collection":"s.c","expiry":500`, `{"ttl":10}`},
		{"collection=s.c", `"op":"upsert","collection":"s.c"`, `{"ttl":"soon"}`},
	}
	for i, c := range cases {
		_, _, single := f.do("PUT", fmt.Sprintf("/default/docs/p%d?%s", i, c.query), "application/json", c.doc)
		res := f.bulkLines(fmt.Sprintf(`{"id":"b%d",%s,"doc":%s}`, i, c.op, c.doc))
		sm := jsonOf(t, single)
		if sm["expiration"] != res[0]["expiration"] || sm["error"] != res[0]["error"] {
			t.Errorf("case %d: single %v, bulk %v", i, sm, res[0])
		}
	}
	// preserve_expiry, then touch.
	f.bulkLines(`{"op":"upsert","id":"t","doc":1,"expiry":100}`)
	res := f.bulkLines(`{"op":"upsert","id":"t","doc":2,"preserve_expiry":true}` + "\n" + `{"op":"touch","id":"t","expiry":300}` + "\n")
	if res[0]["expiration"] != float64(t0+100) || res[1]["expiration"] != float64(t0+300) {
		t.Errorf("preserve and touch: %v", res)
	}
	// Expired at once: not readable.
	f.bulkLines(`{"op":"upsert","id":"gone","doc":1,"expiry":-1}`)
	if st, _, _ := f.do("GET", "/default/docs/gone", "", ""); st != 404 {
		t.Errorf("negative expiry: %d", st)
	}
}

func TestBulkPermission(t *testing.T) {
	f := newFixture(t)
	f.addUser("reader", "readerpw", "data_reader[default]")
	f.addUser("writer", "writerpw", "data_writer[default]")
	body := `{"op":"upsert","id":"a","doc":1}`
	if st, _, out := f.doAs("reader", "readerpw", "POST", "/default/_bulk", ndjson, body); st != 403 {
		t.Errorf("reader: %d %s", st, out)
	}
	if st, _, out := f.doAs("writer", "writerpw", "POST", "/default/_bulk", ndjson, body); st != 200 || !strings.Contains(out, `"id":"a"`) {
		t.Errorf("writer: %d %s", st, out)
	}
	if st, _, out := f.do("POST", "/default/_bulk", formCT, body); st != 415 {
		t.Errorf("form body: %d %s", st, out)
	}
	if st, _, out := f.do("POST", "/nosuch/_bulk", ndjson, body); st != 404 {
		t.Errorf("no bucket: %d %s", st, out)
	}
}

// TestBulkLongLine: a line over the limit is an error line, the next ones go on.
func TestBulkLongLine(t *testing.T) {
	f := newFixture(t)
	big := strings.Repeat("x", engine.MaxValueLen+100<<10)
	res := f.bulkLines(`{"op":"upsert","id":"a","doc":1}` + "\n" + `{"op":"upsert","id":"b","doc":"` + big + `"}` + "\n" + `{"op":"upsert","id":"c","doc":1}` + "\n")
	if len(res) != 3 || res[0]["id"] != "a" || res[1]["error"] != "too_large" || res[2]["id"] != "c" {
		t.Fatalf("%v", res)
	}
}

// TestBulkLargeBodyBoundedMemory streams 100,000 lines (about 95 MiB) and
// checks the heap stays well below the body's size (at its peak 28 MiB;
// under -race 26 MiB for 100,000 lines, 30 MiB for 200,000), and the
// answers come in order. It runs without the race detector (2.6 s against
// ~30 s with it): what it checks is memory, and the bulk path's goroutines
// meet the race detector in the other bulk tests.
func TestBulkLargeBodyBoundedMemory(t *testing.T) {
	racebuild.Skip(t)
	f := newFixture(t)
	const n = 100_000
	pad := strings.Repeat("p", 900)
	pr, pw := io.Pipe()
	go func() {
		bw := bufio.NewWriter(pw)
		for i := range n {
			// 1,000 keys over and over: the engine's own memory stays small.
			fmt.Fprintf(bw, `{"op":"upsert","id":"k%d","doc":{"i":%d,"pad":"%s"}}`+"\n", i%1000, i, pad)
		}
		bw.Flush()
		pw.Close()
	}()
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	req, _ := http.NewRequest("POST", f.srv.URL+"/default/_bulk", pr)
	req.Header.Set("Content-Type", ndjson)
	req.SetBasicAuth(adminUser, adminPass)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	i := 0
	for sc.Scan() {
		var m struct {
			ID    string `json:"id"`
			Error string `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil || m.Error != "" || m.ID != fmt.Sprintf("k%d", i%1000) {
			t.Fatalf("answer %d: %s", i, sc.Bytes())
		}
		i++
	}
	close(stop)
	wg.Wait()
	if err := sc.Err(); err != nil || i != n {
		t.Fatalf("%d answers, %v", i, err)
	}
	t.Logf("peak heap in use %d MiB", peak.Load()>>20)
	if p := peak.Load(); p > 64<<20 {
		t.Errorf("peak heap in use %d MiB for a %d MiB body", p>>20, n*950>>20)
	}
}

// BenchmarkBulkUpsert: small documents through POST /_bulk on a persisted
// (synced) bucket; reports documents/s.
func BenchmarkBulkUpsert(b *testing.B) {
	eng, err := engine.Open(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Close()
	if _, err := eng.CreateBucket(context.Background(), engine.DefaultBucketSettings("default")); err != nil {
		b.Fatal(err)
	}
	users, err := auth.Open(b.TempDir(), &auth.Options{AdminUser: adminUser, AdminPassword: adminPass, Argon2: cheapArgon2, ScramIterations: cheapScram})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(eng, &httpapi.Options{Auth: users}))
	defer srv.Close()
	var body strings.Builder
	for i := range b.N {
		fmt.Fprintf(&body, `{"op":"upsert","id":"doc%d","doc":{"n":%d,"name":"small"}}`+"\n", i, i)
	}
	b.ResetTimer()
	cpu0 := processCPU(b)
	start := time.Now()
	req, _ := http.NewRequest("POST", srv.URL+"/default/_bulk", strings.NewReader(body.String()))
	req.Header.Set("Content-Type", ndjson)
	req.SetBasicAuth(adminUser, adminPass)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	n := 0
	for sc.Scan() {
		if strings.Contains(sc.Text(), `"error"`) {
			b.Fatalf("answer %d: %s", n, sc.Text())
		}
		n++
	}
	resp.Body.Close()
	el := time.Since(start)
	cpu := processCPU(b) - cpu0
	b.StopTimer()
	if n != b.N {
		b.Fatalf("%d answers for %d lines", n, b.N)
	}
	b.ReportMetric(float64(b.N)/el.Seconds(), "docs/s")
	// CPU time (server and client, user and system) per document: a figure
	// that other load on a shared machine changes far less than docs/s.
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/doc")
}

// processCPU is the CPU time the process has used, user and system.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestBulkOneDocumentInOrderWhateverItsCollectionIsCalled: lines on one
// document run in the order of the lines, whether they name the default
// collection ("_default._default") or leave it out: an insert, then an
// upsert naming the collection, then a delete leaving it out, then an
// insert naming it, for each of 300 keys, end with every key holding the
// last insert's value and the answers ok, ok, ok, ok. Before, the lines
// that named the collection were chained apart from those that did not
// and raced them: some inserts found the key there (key_exists), some
// deletes found nothing, some keys ended with an older value.
func TestBulkOneDocumentInOrderWhateverItsCollectionIsCalled(t *testing.T) {
	f := newFixture(t)
	const n = 300
	var in strings.Builder
	for i := range n {
		fmt.Fprintf(&in, `{"op":"insert","id":"k%d","doc":1}`+"\n", i)
		fmt.Fprintf(&in, `{"op":"upsert","id":"k%d","doc":2,"collection":"_default._default"}`+"\n", i)
		fmt.Fprintf(&in, `{"op":"delete","id":"k%d"}`+"\n", i)
		fmt.Fprintf(&in, `{"op":"insert","id":"k%d","doc":4,"collection":"_default._default"}`+"\n", i)
	}
	res := f.bulkLines(in.String())
	if len(res) != 4*n {
		t.Fatalf("%d answers, want %d", len(res), 4*n)
	}
	bad := 0
	for i, m := range res {
		if m["error"] != nil {
			if bad++; bad <= 5 {
				t.Errorf("line %d: %v", i+1, m)
			}
		}
	}
	for i := range n {
		st, _, body := f.do("GET", fmt.Sprintf("/default/docs/k%d", i), "", "")
		if st != 200 || body != "4" {
			if bad++; bad <= 10 {
				t.Errorf("k%d after its lines: %d %s, want 200 4", i, st, body)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d lines or keys out of order", bad)
	}
}

// A bulk line is JSON, so UTF-8: one with invalid UTF-8 (in its doc or its
// id) fails alone, as a PUT declared application/json is refused, and the
// answer stays valid UTF-8.
func TestBulkInvalidUTF8Line(t *testing.T) {
	f := newFixture(t)
	res := f.bulkLines("{\"op\":\"upsert\",\"id\":\"a\",\"doc\":{\"s\":\"\xff\"}}\n" +
		"{\"op\":\"upsert\",\"id\":\"\xfe\",\"doc\":1}\n" +
		`{"op":"upsert","id":"b","doc":1}` + "\n")
	if len(res) != 3 || res[0]["line"] != 1.0 || res[0]["error"] != "bad_request" || res[1]["line"] != 2.0 || res[1]["error"] != "bad_request" || res[2]["error"] != nil {
		t.Fatalf("bulk: %v", res)
	}
	for _, m := range res[:2] {
		if r, _ := m["reason"].(string); !strings.Contains(r, "UTF-8") {
			t.Errorf("reason %q does not name UTF-8", r)
		}
	}
	if st, _, _ := f.do("GET", "/default/docs/a", "", ""); st != 404 {
		t.Errorf("the refused line's document was stored: GET %d", st)
	}
}

// TestBulkCutOffLastLineNotApplied: a client that hangs up in the middle of
// a _bulk body leaves its last line unterminated, and that line may be a
// prefix of what it meant that is still valid JSON ({"v":1} of {"v":12}):
// it is not applied, and its answer says so. The lines before it, each
// ended, are. A body that ends (EOF) still ends its last line.
func TestBulkCutOffLastLineNotApplied(t *testing.T) {
	f := newFixture(t)
	whole := `{"op":"upsert","id":"whole","doc":{"v":1}}` + "\n"
	last := `{"op":"upsert","id":"cut","doc":{"v":1}}`
	for _, tc := range []struct {
		end     error // what reading the body returns after the last byte
		applied bool
	}{{io.ErrUnexpectedEOF, false}, {io.EOF, true}} {
		body := io.MultiReader(strings.NewReader(whole+last), errReader{tc.end})
		req := httptest.NewRequest(http.MethodPost, f.srv.URL+"/default/_bulk", body)
		req.RemoteAddr = "127.0.0.1:40000" // a loopback client, as the fixture's
		req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, f.srv.Listener.Addr()))
		req.Header.Set("Content-Type", ndjson)
		req.SetBasicAuth(adminUser, adminPass)
		rec := httptest.NewRecorder()
		f.srv.Config.Handler.ServeHTTP(rec, req)
		b, err := f.eng.Bucket("default")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.DefaultCollection().Get(context.Background(), "whole"); err != nil {
			t.Fatalf("body ending with %v: the whole first line was not applied: %v (%s)", tc.end, err, rec.Body)
		}
		_, err = b.DefaultCollection().Get(context.Background(), "cut")
		if applied := err == nil; applied != tc.applied {
			t.Fatalf("body ending with %v: the unterminated last line applied %v, want %v (%s)", tc.end, applied, tc.applied, rec.Body)
		}
		if !tc.applied && !strings.Contains(rec.Body.String(), "cut off") {
			t.Errorf("body ending with %v: the answer does not say line 2 was cut off: %s", tc.end, rec.Body)
		}
	}
}

// errReader returns err on every read.
type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// A line's "base64" stores a binary value (one the listings give as
// "base64") as the bytes it decodes to, with the line's flags and expiry:
// how a value that is not JSON goes through a line of JSON.
func TestBulkBase64(t *testing.T) {
	f := newFixture(t)
	res := f.bulkLines(`{"op":"upsert","id":"bin","base64":"AP9yYXc=","flags":33554432,"expiry":1800000000}
{"op":"upsert","id":"empty","base64":""}
{"op":"upsert","id":"both","base64":"AA==","doc":{}}
{"op":"upsert","id":"bad","base64":"not base64!"}
{"op":"upsert","id":"num","base64":12}
`)
	if len(res) != 5 {
		t.Fatalf("answers: %v", res)
	}
	for i, id := range []string{"bin", "empty"} {
		if res[i]["error"] != nil {
			t.Errorf("%s: %v", id, res[i])
		}
	}
	for i, want := range map[int]string{2: "doc and base64 cannot both be given", 3: "base64 is not standard base64", 4: "base64 must be a string"} {
		if res[i]["error"] != "bad_request" || !strings.Contains(fmt.Sprint(res[i]["reason"]), want) {
			t.Errorf("line %d: %v, want %q", i+1, res[i], want)
		}
	}
	b, err := f.eng.Bucket("default")
	if err != nil {
		t.Fatal(err)
	}
	coll := b.DefaultCollection()
	d, err := coll.Get(context.Background(), "bin")
	if err != nil {
		t.Fatal(err)
	}
	if string(d.Value) != "\x00\xffraw" || d.Type != engine.TypeBinary || d.Flags != 33554432 || d.Expiration != 1800000000 {
		t.Errorf("bin stored as %q %s flags %d expiration %d", d.Value, d.Type, d.Flags, d.Expiration)
	}
	if d, err := coll.Get(context.Background(), "empty"); err != nil || len(d.Value) != 0 || d.Type != engine.TypeBinary {
		t.Errorf("empty: %v %+v", err, d)
	}
	for _, id := range []string{"both", "bad", "num"} {
		if _, err := coll.Get(context.Background(), id); err == nil {
			t.Errorf("%s stored from a bad line", id)
		}
	}
}
