package jsruntime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/jsruntime"
)

// newPool returns a pool closed when the test ends.
func newPool(t testing.TB, opts *jsruntime.Options) *jsruntime.Pool {
	t.Helper()
	p := jsruntime.NewPool(opts)
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p
}

// load loads views into p, failing the test on error.
func load(t testing.TB, p *jsruntime.Pool, views ...jsruntime.ViewSource) *jsruntime.Program {
	t.Helper()
	pr, err := p.Load(views)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return pr
}

// jsonDoc is a JSON document with the given id.
func jsonDoc(id, value string) jsruntime.Doc {
	return jsruntime.Doc{Value: []byte(value), Meta: jsruntime.Meta{ID: id, Type: jsruntime.TypeJSON}}
}

// rows renders a view result as "key=value" lines, or "error: ..." .
func rows(r jsruntime.ViewResult) string {
	if r.Err != nil {
		return "error: " + r.Err.Error()
	}
	var sb strings.Builder
	for i, e := range r.Emits {
		if i > 0 {
			sb.WriteByte('\n')
		}
		fmt.Fprintf(&sb, "%s=%s", e.Key, e.Value)
	}
	return sb.String()
}

// hangDeadline bounds a wait that only a hang would reach, however busy
// the machine (a shared 2-core runner, -race): tests assert outcomes and
// order, never speed.
const hangDeadline = 2 * time.Minute

// within runs f and fails the test if it has not returned after d (it
// waits for f in any case).
func within(t *testing.T, d time.Duration, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Errorf("still running after %v", d)
		<-done
	}
}

// mapOne maps one document through a one-view program with mapSrc.
func mapOne(t *testing.T, p *jsruntime.Pool, mapSrc string, doc jsruntime.Doc) jsruntime.ViewResult {
	t.Helper()
	pr := load(t, p, jsruntime.ViewSource{Name: "v", Map: mapSrc})
	res, err := pr.Map(context.Background(), []jsruntime.Doc{doc})
	if err != nil {
		t.Fatalf("Map: %v", err)
	}
	return res[0][0]
}

func TestMap_MetaShape(t *testing.T) {
	p := newPool(t, nil)
	doc := jsruntime.Doc{
		Value: []byte(`{"a":1}`),
		Meta: jsruntime.Meta{
			ID: "doc1", Rev: "3-000000367916708a0000000000000000", Seq: 42, VB: 513,
			Expiration: 1900000000, Flags: 7, Type: jsruntime.TypeJSON,
			TS: 1800000000, Created: 1700000000,
		},
	}
	got := rows(mapOne(t, p, `function (doc, meta) { emit(meta.id, meta); }`, doc))
	want := `"doc1"={"id":"doc1","rev":"3-000000367916708a0000000000000000","seq":"42","vb":"513",` +
		`"expiration":1900000000,"flags":7,"type":"json","ts":1800000000,"created":1700000000}`
	if got != want {
		t.Errorf("meta:\n got %s\nwant %s", got, want)
	}
	got = rows(mapOne(t, p, `function (doc, meta) {
		emit([typeof meta.seq, typeof meta.vb, typeof meta.expiration, typeof meta.flags], null);
	}`, doc))
	if want := `["string","string","number","number"]=null`; got != want {
		t.Errorf("meta types: got %s, want %s", got, want)
	}
	// An empty Meta.Type means JSON.
	doc.Meta.Type = ""
	if got := rows(mapOne(t, p, `function (doc, meta) { emit(meta.type, doc.a); }`, doc)); got != `"json"=1` {
		t.Errorf("empty type: got %s", got)
	}
}

func TestMap_Base64Document(t *testing.T) {
	p := newPool(t, nil)
	doc := jsruntime.Doc{Value: []byte{0xff, 0x00, 'h', 'i'}, Meta: jsruntime.Meta{ID: "bin", Type: jsruntime.TypeBase64}}
	got := rows(mapOne(t, p, `function (doc, meta) {
		emit(meta.type, doc);
		emit("decoded", decodeBase64(doc));
	}`, doc))
	want := `"base64"="/wBoaQ=="` + "\n" + `"decoded"=[255,0,104,105]`
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	// Not JSON, so not parsed even when it looks like it.
	doc = jsruntime.Doc{Value: []byte(`{"a":1}`), Meta: jsruntime.Meta{ID: "b", Type: jsruntime.TypeBase64}}
	if got := rows(mapOne(t, p, `function (doc) { emit(typeof doc, doc.a); }`, doc)); got != `"string"=null` {
		t.Errorf("base64 doc: got %s", got)
	}
}

func TestMap_Helpers(t *testing.T) {
	p := newPool(t, nil)
	doc := jsonDoc("h", `{"values":[1,2,3.5],"date":"2013-02-24T18:30:59.123Z","b64":"NQ==","ms":86400000}`)
	for _, tc := range []struct{ name, src, want string }{
		{"sum", `function (doc) { emit(sum(doc.values), sum([])); }`, `6.5=0`},
		{"dateToArray string", `function (doc) { emit(dateToArray(doc.date)); }`, `[2013,2,24,18,30,59]=null`},
		{"dateToArray Date", `function (doc) { emit(dateToArray(new Date(Date.UTC(2020, 11, 31, 23, 59, 58)))); }`, `[2020,12,31,23,59,58]=null`},
		{"dateToArray millis", `function (doc) { emit(dateToArray(doc.ms)); }`, `[1970,1,2,0,0,0]=null`},
		{"dateToArray extended year", `function (doc) { emit(dateToArray("+033658-09-27T01:46:40.000Z")); }`, `[33658,9,27,1,46,40]=null`},
		{"dateToArray invalid", `function (doc) { emit(dateToArray("not a date")); }`, `null=null`},
		{"decodeBase64", `function (doc) { emit(String.fromCharCode.apply(null, decodeBase64(doc.b64))); }`, `"5"=null`},
		{"decodeBase64 not a string", `function (doc) { decodeBase64(5); }`, `error: jsruntime: view v: map: Input is not a string`},
		{"decodeBase64 invalid", `function (doc) { decodeBase64("abc"); }`, `error: jsruntime: view v: map: Invalid base64 source.`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := rows(mapOne(t, p, tc.src, doc)); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// recordHandler is a slog handler that keeps the records it gets.
type recordHandler struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r)
	return nil
}
func (h *recordHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordHandler) WithGroup(string) slog.Handler      { return h }

func TestMap_Log(t *testing.T) {
	h := &recordHandler{}
	p := newPool(t, &jsruntime.Options{Logger: slog.New(h)})
	r := mapOne(t, p, `function (doc, meta) { log("seen", meta.id, {n: doc.n}, [1], 2); }`, jsonDoc("d7", `{"n":5}`))
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if len(h.records) != 1 {
		t.Fatalf("got %d log records, want 1", len(h.records))
	}
	attrs := map[string]string{}
	h.records[0].Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
	want := map[string]string{"view": "v", "doc": "d7", "msg": `seen d7 {"n":5} [1] 2`}
	for k, v := range want {
		if attrs[k] != v {
			t.Errorf("log attr %s = %q, want %q", k, attrs[k], v)
		}
	}
	// Without a logger, log is a no-op.
	if r := mapOne(t, newPool(t, nil), `function (doc) { log("x"); emit(1); }`, jsonDoc("d", `{}`)); rows(r) != "1=null" {
		t.Errorf("log without logger: %s", rows(r))
	}
}

func TestMap_EmitArguments(t *testing.T) {
	p := newPool(t, nil)
	doc := jsonDoc("e", `{"s":"x\"y\u00e9\n","n":-0.5,"big":12345678901234567890,"nested":{"b":1,"a":[true,false,null]}}`)
	for _, tc := range []struct{ name, src, want string }{
		{"no arguments", `function () { emit(); }`, `null=null`},
		{"key only", `function (doc) { emit(doc.s); }`, `"x\"yé\n"=null`},
		{"key and value", `function (doc) { emit(doc.n, doc.nested); }`, `-0.5={"b":1,"a":[true,false,null]}`},
		{"undefined key", `function (doc) { emit(doc.missing, 1); }`, `null=1`},
		{"NaN and Infinity", `function () { emit([NaN, Infinity, -Infinity], 0/0); }`, `[null,null,null]=null`},
		{"undefined inside", `function () { emit([undefined, function () {}], {a: undefined, b: 2, f: function () {}}); }`, `[null,null]={"b":2}`},
		{"numbers", `function (doc) { emit([20, 20.0, 1e21, 1.5e-7, 0.1, -0, doc.big, 2e3], 123456789.5); }`, `[20,20,1e+21,1.5e-7,0.1,0,12345678901234567000,2000]=123456789.5`},
		{"date and boxed", `function () { emit(new Date(0), [new Number(3), new String("s"), new Boolean(false)]); }`, `"1970-01-01T00:00:00.000Z"=[3,"s",false]`},
		{"toJSON", `function () { emit({toJSON: function (k) { return "k:" + k; }}, {x: {toJSON: function (k) { return k; }}}); }`, `"k:"={"x":"x"}`},
		{"control characters", `function () { emit("\u0001\t\u001f"); }`, `"\u0001\t\u001f"=null`},
		{"several", `function () { emit(1, "a"); emit(1, "a"); emit(2); }`, "1=\"a\"\n1=\"a\"\n2=null"},
		{"function key", `function () { emit(function () {}, 1); }`, `error: jsruntime: view v: map: TypeError: emitted key is a function, which has no JSON form`},
		{"function value", `function () { emit(1, emit); }`, `error: jsruntime: view v: map: TypeError: emitted value is a function, which has no JSON form`},
		{"cycle", `function () { var a = {}; a.a = a; emit(a); }`, `error: jsruntime: view v: map: TypeError: Converting circular structure to JSON`},
		{"caught", `function () { try { emit(1, function () {}); } catch (e) { emit("caught", String(e)); } }`, `"caught"="TypeError: emitted value is a function, which has no JSON form"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := rows(mapOne(t, p, tc.src, doc)); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestMap_DocumentParsing(t *testing.T) {
	p := newPool(t, nil)
	src := `function (doc) { emit(Object.keys(doc), doc); }`
	doc := jsonDoc("p", ` {"z":1, "a":{"y":[1,2,{"x":"\ud83d\ude00"}]}, "__proto__":5, "e":1E2, "u":"\u0041"} `)
	want := `["z","a","__proto__","e","u"]={"z":1,"a":{"y":[1,2,{"x":"😀"}]},"__proto__":5,"e":100,"u":"A"}`
	if got := rows(mapOne(t, p, src, doc)); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	// Invalid JSON fails every view of the document, with ErrInvalidJSON.
	r := mapOne(t, p, src, jsonDoc("bad", `{"a":}`))
	if !errors.Is(r.Err, jsruntime.ErrInvalidJSON) {
		t.Errorf("invalid JSON: got %v, want ErrInvalidJSON", r.Err)
	}
	// A scalar document is a scalar.
	if got := rows(mapOne(t, p, `function (doc) { emit(typeof doc, doc); }`, jsonDoc("s", `"str"`))); got != `"string"="str"` {
		t.Errorf("scalar doc: %s", got)
	}
}

func TestMap_ManyViewsOnePass(t *testing.T) {
	p := newPool(t, &jsruntime.Options{Workers: 2})
	pr := load(t, p,
		jsruntime.ViewSource{Name: "by_type", Map: `function (doc, meta) { emit(doc.type, meta.id); }`},
		jsruntime.ViewSource{Name: "none", Map: `function (doc) { if (doc.n < 0) emit(doc.n); }`},
		jsruntime.ViewSource{Name: "by_n", Map: `function (doc) { emit(doc.n, null); emit(-doc.n, null); }`},
	)
	if got := strings.Join(pr.Views(), ","); got != "by_type,none,by_n" {
		t.Errorf("Views() = %s", got)
	}
	var docs []jsruntime.Doc
	for i := 0; i < 500; i++ {
		docs = append(docs, jsonDoc(fmt.Sprintf("d%03d", i), fmt.Sprintf(`{"type":"t%d","n":%d}`, i%3, i)))
	}
	res, err := pr.Map(context.Background(), docs)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != len(docs) {
		t.Fatalf("got %d results, want %d", len(res), len(docs))
	}
	for i, r := range res {
		if len(r) != 3 {
			t.Fatalf("doc %d: %d view results, want 3", i, len(r))
		}
		if got, want := rows(r[0]), fmt.Sprintf(`"t%d"="d%03d"`, i%3, i); got != want {
			t.Errorf("doc %d by_type: %s, want %s", i, got, want)
		}
		if r[1].Emits != nil || r[1].Err != nil {
			t.Errorf("doc %d none: %+v", i, r[1])
		}
		if got, want := rows(r[2]), fmt.Sprintf("%d=null\n%d=null", i, -i); got != want {
			t.Errorf("doc %d by_n: %s, want %s", i, got, want)
		}
	}
	// Empty input.
	if res, err := pr.Map(context.Background(), nil); err != nil || len(res) != 0 {
		t.Errorf("Map(nil) = %v, %v", res, err)
	}
}

func TestMap_ViewsShareDocInOnePass(t *testing.T) {
	p := newPool(t, nil)
	pr := load(t, p,
		jsruntime.ViewSource{Name: "a", Map: `function (doc) { doc.seenBy = "a"; emit(1); }`},
		jsruntime.ViewSource{Name: "b", Map: `function (doc) { emit(doc.seenBy); }`},
	)
	res, err := pr.Map(context.Background(), []jsruntime.Doc{jsonDoc("x", `{}`)})
	if err != nil {
		t.Fatal(err)
	}
	// As in Couchbase, the views of a design document see the same object.
	if got := rows(res[0][1]); got != `"a"=null` {
		t.Errorf("b saw %s", got)
	}
}

func TestMap_ThrowIsolatedToView(t *testing.T) {
	p := newPool(t, nil)
	pr := load(t, p,
		jsruntime.ViewSource{Name: "ok1", Map: `function (doc) { emit(doc.k); }`},
		jsruntime.ViewSource{Name: "throws", Map: `function (doc) { emit("partial"); if (doc.k == 2) throw new TypeError("bad " + doc.k); emit("full"); }`},
		jsruntime.ViewSource{Name: "throws_string", Map: `function (doc) { if (doc.k == 2) { throw "plain"; } }`},
		jsruntime.ViewSource{Name: "ok2", Map: `function (doc) { emit(doc.k * 10); }`},
	)
	res, err := pr.Map(context.Background(), []jsruntime.Doc{jsonDoc("1", `{"k":1}`), jsonDoc("2", `{"k":2}`), jsonDoc("3", `{"k":3}`)})
	if err != nil {
		t.Fatal(err)
	}
	var se *jsruntime.ScriptError
	if !errors.As(res[1][1].Err, &se) || se.View != "throws" || se.Func != "map" || se.Msg != "TypeError: bad 2" {
		t.Errorf("throw: got %#v", res[1][1].Err)
	}
	if res[1][1].Emits != nil {
		t.Errorf("a failed view kept its partial rows: %s", rows(res[1][1]))
	}
	if !errors.As(res[1][2].Err, &se) || se.Msg != "plain" {
		t.Errorf("throw string: got %v", res[1][2].Err)
	}
	for i, want := range []string{"1", "2", "3"} {
		if got := rows(res[i][0]); got != want+"=null" {
			t.Errorf("doc %d ok1: %s", i, got)
		}
		if got := rows(res[i][3]); got != want+"0=null" {
			t.Errorf("doc %d ok2: %s", i, got)
		}
	}
	if got := rows(res[2][1]); got != "\"partial\"=null\n\"full\"=null" {
		t.Errorf("doc after the throw: %s", got)
	}
}

func TestMap_TimeoutIsolatedToViewAndDocument(t *testing.T) {
	// A limit of 4s gets the longest grace (1s) before the watchdog gives up
	// on a call that has not noticed its interrupt: a process stalled past
	// the grace on a busy machine would have the whole document abandoned,
	// its other views failing too.
	p := newPool(t, &jsruntime.Options{Workers: 1, Timeout: 4 * time.Second})
	pr := load(t, p,
		jsruntime.ViewSource{Name: "before", Map: `function (doc) { emit(doc.k); }`},
		jsruntime.ViewSource{Name: "loops", Map: `function (doc) { emit("partial"); if (doc.k == 2) { while (true) {} } emit(doc.k); }`},
		jsruntime.ViewSource{Name: "catches", Map: `function (doc) { if (doc.k == 2) { try { while (true) {} } catch (e) { emit("caught"); } } }`},
		jsruntime.ViewSource{Name: "after", Map: `function (doc) { emit(doc.k + 100); }`},
	)
	var res [][]jsruntime.ViewResult
	var err error
	within(t, hangDeadline, func() {
		res, err = pr.Map(context.Background(), []jsruntime.Doc{jsonDoc("1", `{"k":1}`), jsonDoc("2", `{"k":2}`), jsonDoc("3", `{"k":3}`)})
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range []int{1, 2} {
		err := res[1][j].Err
		var se *jsruntime.ScriptError
		if !errors.Is(err, jsruntime.ErrTimeout) || !errors.As(err, &se) || se.View != pr.Views()[j] {
			t.Errorf("view %d: got %v, want ErrTimeout for that view", j, err)
		}
		if res[1][j].Emits != nil {
			t.Errorf("view %d kept partial rows", j)
		}
	}
	for i, k := range []int{1, 2, 3} {
		if got, want := rows(res[i][0]), fmt.Sprintf("%d=null", k); got != want {
			t.Errorf("doc %d before: %s", i, got)
		}
		if got, want := rows(res[i][3]), fmt.Sprintf("%d=null", k+100); got != want {
			t.Errorf("doc %d after: %s", i, got)
		}
	}
	// The runtime is usable afterwards, with no interrupt left pending and
	// nothing of the interrupted call leaking into the next one.
	if got := rows(res[2][1]); got != "\"partial\"=null\n3=null" {
		t.Errorf("doc 3 in the view that timed out on doc 2: %s", got)
	}
	res, err = pr.Map(context.Background(), []jsruntime.Doc{jsonDoc("4", `{"k":4}`)})
	if err != nil || rows(res[0][1]) != "\"partial\"=null\n4=null" {
		t.Errorf("next Map: %v %s", err, rows(res[0][1]))
	}
}

func TestMap_ContextCancelInterrupts(t *testing.T) {
	// The context ends once a loop runs (its log line), not after a sleep:
	// ended before Map started, it would test only the check on entry.
	ctx, cancel := context.WithCancel(context.Background())
	p := newPool(t, &jsruntime.Options{Workers: 2, Timeout: time.Minute, Logger: slog.New(&funcHandler{cancel})})
	pr := load(t, p, jsruntime.ViewSource{Name: "loops", Map: `function (doc) { if (doc.loop) { log("looping"); while (true) {} } emit(1); }`})
	var res [][]jsruntime.ViewResult
	var err error
	within(t, hangDeadline, func() {
		res, err = pr.Map(ctx, []jsruntime.Doc{jsonDoc("a", `{"loop":true}`), jsonDoc("b", `{"loop":true}`), jsonDoc("c", `{}`)})
	})
	if !errors.Is(err, context.Canceled) || res != nil {
		t.Errorf("Map = %v, %v; want nil, context.Canceled", res, err)
	}
	// The workers are fine afterwards.
	res, err = pr.Map(context.Background(), []jsruntime.Doc{jsonDoc("c", `{}`), jsonDoc("d", `{}`)})
	if err != nil || rows(res[0][0]) != "1=null" || rows(res[1][0]) != "1=null" {
		t.Errorf("after cancel: %v %v", res, err)
	}
	// An already cancelled context runs nothing.
	if _, err := pr.Map(ctx, []jsruntime.Doc{jsonDoc("c", `{}`)}); !errors.Is(err, context.Canceled) {
		t.Errorf("Map with cancelled ctx: %v", err)
	}
}

func TestMap_Sandbox(t *testing.T) {
	p := newPool(t, nil)
	got := rows(mapOne(t, p, `function () {
		emit([typeof require, typeof process, typeof module, typeof setTimeout, typeof fetch, typeof XMLHttpRequest, typeof console], null);
	}`, jsonDoc("s", `{}`)))
	if want := `["undefined","undefined","undefined","undefined","undefined","undefined","undefined"]=null`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	// Code made at run time must not make the parser read a source map file.
	got = rows(mapOne(t, p, `function () {
		var f = new Function("return 7;\n//# sourceMappingURL=/definitely/not/here.map");
		emit(f(), eval("1 + 1\n//# sourceMappingURL=/etc/passwd"));
	}`, jsonDoc("s", `{}`)))
	if got != "7=2" {
		t.Errorf("source map comments: %s", got)
	}
}

func TestMap_GlobalsIsolatedBetweenDesignDocuments(t *testing.T) {
	p := newPool(t, &jsruntime.Options{Workers: 1})
	a := load(t, p, jsruntime.ViewSource{Name: "v", Map: `function () { leaked = "from a"; emit = null; }`})
	b := load(t, p, jsruntime.ViewSource{Name: "v", Map: `function () { emit(typeof leaked); }`})
	if _, err := a.Map(context.Background(), []jsruntime.Doc{jsonDoc("1", `{}`)}); err != nil {
		t.Fatal(err)
	}
	res, err := b.Map(context.Background(), []jsruntime.Doc{jsonDoc("1", `{}`)})
	if err != nil || rows(res[0][0]) != `"undefined"=null` {
		t.Errorf("b: %v %s", err, rows(res[0][0]))
	}
}

func TestMap_StackOverflow(t *testing.T) {
	p := newPool(t, &jsruntime.Options{MaxCallStackSize: 500})
	for _, src := range []string{
		`function () { function f(n) { return f(n + 1) + 1; } f(0); }`,
		`function () { function f() { [1].forEach(f); } f(); }`,
	} {
		r := mapOne(t, p, src, jsonDoc("r", `{}`))
		if !errors.Is(r.Err, jsruntime.ErrStackOverflow) {
			t.Errorf("%s: got %v, want ErrStackOverflow", src, r.Err)
		}
	}
	if r := mapOne(t, p, `function () { emit(1); }`, jsonDoc("r", `{}`)); rows(r) != "1=null" {
		t.Errorf("after overflow: %s", rows(r))
	}
}

func TestMap_EmitLimits(t *testing.T) {
	p := newPool(t, nil)
	for _, tc := range []struct {
		name, src string
		want      error
	}{
		{"key too long", `function () { emit("x".repeat(4094)); }`, jsruntime.ErrKeyTooLong},
		{"key just fits", `function () { emit("x".repeat(4093)); }`, nil},
		{"too much data", `function () { var v = "x".repeat(1000); for (var i = 0; i < 2000; i++) { emit(i, v); } }`, jsruntime.ErrEmitTooLarge},
		{"not catchable", `function () { try { emit("x".repeat(5000)); } catch (e) {} emit("after"); }`, jsruntime.ErrKeyTooLong},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := mapOne(t, p, tc.src, jsonDoc("l", `{}`))
			if tc.want == nil {
				if r.Err != nil || len(r.Emits) != 1 || len(r.Emits[0].Key) != 4095 {
					t.Errorf("got %v, %d rows", r.Err, len(r.Emits))
				}
				return
			}
			var se *jsruntime.ScriptError
			if !errors.Is(r.Err, tc.want) || !errors.As(r.Err, &se) || r.Emits != nil {
				t.Errorf("got %v (%d rows), want %v", r.Err, len(r.Emits), tc.want)
			}
		})
	}
}

func TestMap_EmitsDoNotAlias(t *testing.T) {
	p := newPool(t, nil)
	r := mapOne(t, p, `function () { for (var i = 0; i < 3000; i++) emit(i, "v" + i); }`, jsonDoc("a", `{}`))
	if r.Err != nil || len(r.Emits) != 3000 {
		t.Fatalf("got %v, %d rows", r.Err, len(r.Emits))
	}
	for i, e := range r.Emits {
		if string(e.Key) != fmt.Sprint(i) || string(e.Value) != fmt.Sprintf(`"v%d"`, i) {
			t.Fatalf("row %d: %s=%s", i, e.Key, e.Value)
		}
	}
	// Appending to one slice must not overwrite its neighbour.
	k0 := append(r.Emits[0].Key, "junk"...)
	_ = k0
	if string(r.Emits[0].Value) != `"v0"` {
		t.Errorf("appending to a key overwrote its value: %s", r.Emits[0].Value)
	}
}

func TestMap_UnusedParametersAreNotBuilt(t *testing.T) {
	p := newPool(t, nil)
	// The document is not valid JSON, but no view reads it: no error.
	pr := load(t, p, jsruntime.ViewSource{Name: "ids", Map: `function (doc, meta) { emit(meta.id); }`})
	res, err := pr.Map(context.Background(), []jsruntime.Doc{jsonDoc("x", `not json`)})
	if err != nil || rows(res[0][0]) != `"x"=null` {
		t.Errorf("got %v %s", err, rows(res[0][0]))
	}
	// arguments and eval count as reading every parameter.
	for _, src := range []string{
		`function () { emit(arguments[1].id, arguments[0].a); }`,
		`function (d, m) { emit(eval("m.id"), eval("d.a")); }`,
		`function (d, m) { emit(\u006d.id, d.a); }`,
	} {
		if got := rows(mapOne(t, p, src, jsonDoc("y", `{"a":1}`))); got != `"y"=1` {
			t.Errorf("%s: %s", src, got)
		}
	}
}

func TestMap_ClosedPoolAndProgram(t *testing.T) {
	looping := make(chan struct{}) // closed when the looping Map is inside its loop
	var once sync.Once
	p := jsruntime.NewPool(&jsruntime.Options{Workers: 1, Timeout: time.Minute,
		Logger: slog.New(&funcHandler{func() { once.Do(func() { close(looping) }) }})})
	pr := load(t, p, jsruntime.ViewSource{Name: "v", Map: `function (doc) { if (doc.loop) { log("looping"); while (true) {} } emit(1); }`, Reduce: "function (k, v) { return v.length; }"})
	other := load(t, p, jsruntime.ViewSource{Name: "v", Map: `function () { emit(2); }`})
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Map(context.Background(), []jsruntime.Doc{jsonDoc("a", `{}`)}); !errors.Is(err, jsruntime.ErrClosed) {
		t.Errorf("Map on a closed program: %v", err)
	}
	// Close interrupts a running Map.
	done := make(chan error, 1)
	go func() {
		_, err := pr.Map(context.Background(), []jsruntime.Doc{jsonDoc("a", `{"loop":true}`)})
		done <- err
	}()
	select { // Close must find the Map running, or it would test nothing
	case <-looping:
	case err := <-done:
		t.Fatalf("the looping Map returned before Close: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, jsruntime.ErrClosed) {
		t.Errorf("Map interrupted by Close: %v", err)
	}
	if _, err := pr.Map(context.Background(), []jsruntime.Doc{jsonDoc("a", `{}`)}); !errors.Is(err, jsruntime.ErrClosed) {
		t.Errorf("Map after Close: %v", err)
	}
	if _, err := p.Load(nil); !errors.Is(err, jsruntime.ErrClosed) {
		t.Errorf("Load after Close: %v", err)
	}
	red, err := pr.Reducer("v")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := red.Rereduce(context.Background(), nil); !errors.Is(err, jsruntime.ErrClosed) {
		t.Errorf("Rereduce after Close: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestMap_RuntimeCacheEviction(t *testing.T) {
	p := newPool(t, &jsruntime.Options{Workers: 1, CachedPrograms: 1})
	var progs []*jsruntime.Program
	for i := 0; i < 3; i++ {
		progs = append(progs, load(t, p, jsruntime.ViewSource{Name: "v", Map: fmt.Sprintf(`function () { var counter = (typeof counter == "number" ? counter : 0) + 1; emit(%d, counter); }`, i)}))
	}
	for round := 0; round < 2; round++ {
		for i, pr := range progs {
			res, err := pr.Map(context.Background(), []jsruntime.Doc{jsonDoc("a", `{}`)})
			if err != nil {
				t.Fatal(err)
			}
			// Each Map on an evicted program starts from a fresh runtime (globals
			// cannot be added: the global object is frozen).
			if got, want := rows(res[0][0]), fmt.Sprintf("%d=1", i); got != want {
				t.Errorf("round %d program %d: %s, want %s", round, i, got, want)
			}
		}
	}
}

func TestMap_ConcurrentUse(t *testing.T) {
	p := newPool(t, &jsruntime.Options{Workers: 3})
	pr := load(t, p,
		jsruntime.ViewSource{Name: "a", Map: `function (doc, meta) { emit([doc.g, meta.id], doc.v); }`, Reduce: "_sum"},
		jsruntime.ViewSource{Name: "b", Map: `function (doc) { emit(doc.g, 1); }`, Reduce: `function (keys, values, rereduce) { return sum(values); }`},
	)
	sumRed, _ := pr.Reducer("a")
	jsRed, _ := pr.Reducer("b")
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for g := 0; g < 8; g++ {
		wg.Go(func() {
			for round := 0; round < 20; round++ {
				var docs []jsruntime.Doc
				for i := 0; i < 20; i++ {
					docs = append(docs, jsonDoc(fmt.Sprintf("g%d-%d", g, i), fmt.Sprintf(`{"g":%d,"v":%d}`, g, i)))
				}
				res, err := pr.Map(context.Background(), docs)
				if err != nil {
					errs <- err
					return
				}
				var vals [][]byte
				for i, r := range res {
					if want := fmt.Sprintf(`[%d,"g%d-%d"]=%d`, g, g, i, i); rows(r[0]) != want {
						errs <- fmt.Errorf("got %s, want %s", rows(r[0]), want)
						return
					}
					vals = append(vals, r[1].Emits[0].Value)
				}
				if out, err := sumRed.Rereduce(context.Background(), vals); err != nil || string(out) != "20" {
					errs <- fmt.Errorf("_sum: %s %v", out, err)
					return
				}
				if out, err := jsRed.Rereduce(context.Background(), vals); err != nil || string(out) != "20" {
					errs <- fmt.Errorf("js reduce: %s %v", out, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestMap_ResultsAreValidJSON checks that every emitted key and value is
// JSON that encoding/json accepts, over a mix of values.
func TestMap_ResultsAreValidJSON(t *testing.T) {
	p := newPool(t, nil)
	r := mapOne(t, p, `function (doc) {
		var vals = [null, true, 1, -1.25e-9, 3e300, "s\u2028\ud800", [], {}, [[[]]], {"a": {"b": [1, {"c": null}]}}, new Date(1e12), doc];
		for (var i = 0; i < vals.length; i++) emit(vals[i], vals[vals.length - 1 - i]);
	}`, jsonDoc("j", `{"x":[1,"2",{"3":4.5}],"y":"\u0000"}`))
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	for _, e := range r.Emits {
		for _, b := range [][]byte{e.Key, e.Value} {
			if !json.Valid(b) {
				t.Errorf("invalid JSON emitted: %s", b)
			}
			if !bytes.Equal(bytes.TrimSpace(b), b) {
				t.Errorf("white space around %q", b)
			}
		}
	}
}

func TestPool_CloseLeavesNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	p := jsruntime.NewPool(&jsruntime.Options{Workers: 3, Timeout: 20 * time.Millisecond})
	pr := load(t, p, jsruntime.ViewSource{Name: "v", Map: `function (doc) { if (doc.loop) while (true) {} emit(1); }`, Reduce: "function (k, v) { return v.length; }"})
	var docs []jsruntime.Doc
	for i := 0; i < 50; i++ {
		docs = append(docs, jsonDoc(fmt.Sprint(i), fmt.Sprintf(`{"loop":%v}`, i%25 == 0)))
	}
	if _, err := pr.Map(context.Background(), docs); err != nil {
		t.Fatal(err)
	}
	red, _ := pr.Reducer("v")
	if _, err := red.Rereduce(context.Background(), [][]byte{[]byte("1")}); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		n := runtime.NumGoroutine()
		if n <= before {
			break
		}
		if i == 6000 { // a minute: only a leak, not a busy machine, gets here
			t.Fatalf("%d goroutines after Close, %d before", n, before)
		}
		time.Sleep(10 * time.Millisecond) // polling: the goroutines end after Close returns
	}
}

func TestMap_PromiseJobsAreTimeLimitedAndCannotEmit(t *testing.T) {
	// 4s: the longest grace, as in TestMap_TimeoutIsolatedToViewAndDocument.
	p := newPool(t, &jsruntime.Options{Workers: 1, Timeout: 4 * time.Second})
	pr := load(t, p, jsruntime.ViewSource{Name: "v", Map: `function (doc) {
		Promise.resolve().then(function () { emit("late"); });
		(async function () { await 0; if (doc.loop) { while (true) {} } })();
		emit(doc.k);
	}`})
	var res [][]jsruntime.ViewResult
	var err error
	within(t, hangDeadline, func() {
		res, err = pr.Map(context.Background(), []jsruntime.Doc{jsonDoc("a", `{"k":1,"loop":true}`), jsonDoc("b", `{"k":2}`)})
	})
	if err != nil {
		t.Fatal(err)
	}
	if rows(res[0][0]) != "1=null" || rows(res[1][0]) != "2=null" {
		t.Errorf("got %s and %s", rows(res[0][0]), rows(res[1][0]))
	}
	res, err = pr.Map(context.Background(), []jsruntime.Doc{jsonDoc("c", `{"k":3}`)})
	if err != nil || rows(res[0][0]) != "3=null" {
		t.Errorf("next Map: %v %v", res, err)
	}
}

// A document may emit at most MaxEmitsPerDoc rows into a view; more fail the
// view for that document with Couchbase's text, which counts every emit.
func TestMap_TooManyEmits(t *testing.T) {
	p := newPool(t, nil)
	r := mapOne(t, p, `function () { for (var i = 0; i < 70000; i++) emit(i, null); }`, jsonDoc("doc1", `{}`))
	var se *jsruntime.ScriptError
	if !errors.Is(r.Err, jsruntime.ErrTooManyEmits) || !errors.As(r.Err, &se) || r.Emits != nil {
		t.Fatalf("got %v (%d rows), want ErrTooManyEmits", r.Err, len(r.Emits))
	}
	if want := "Too many (70000) keys emitted for document `doc1` (maximum allowed is 65535"; se.Msg != want {
		t.Errorf("message %q, want %q", se.Msg, want)
	}
	r = mapOne(t, p, `function () { for (var i = 0; i < 65535; i++) emit(i, null); }`, jsonDoc("doc2", `{}`))
	if r.Err != nil || len(r.Emits) != jsruntime.MaxEmitsPerDoc {
		t.Errorf("65535 rows: got %v, %d rows", r.Err, len(r.Emits))
	}
	// The count starts again for the next document.
	if r := mapOne(t, p, `function () { emit(1); }`, jsonDoc("doc3", `{}`)); r.Err != nil || len(r.Emits) != 1 {
		t.Errorf("after: %v, %d rows", r.Err, len(r.Emits))
	}
}

// TestMapEachReportsEachDocument: MapEach calls done once per document, as
// soon as its results are final, with those results (a timeout among them),
// so that a caller can count progress and failures while a long Map runs.
func TestMapEachReportsEachDocument(t *testing.T) {
	p := newPool(t, &jsruntime.Options{Workers: 4, Timeout: 50 * time.Millisecond})
	pr := load(t, p, jsruntime.ViewSource{Name: "v", Map: `function (doc, meta) { if (doc.loop) { while (true) {} } emit(meta.id, null); }`})
	const n = 40
	docs := make([]jsruntime.Doc, n)
	for i := range docs {
		docs[i] = jsonDoc(fmt.Sprint(i), fmt.Sprintf(`{"loop":%v}`, i%10 == 3))
	}
	var mu sync.Mutex
	seen := make([]string, n)
	calls := 0
	res, err := pr.MapEach(context.Background(), docs, func(i int, r []jsruntime.ViewResult) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		seen[i] += rows(r[0]) + ";"
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls != n {
		t.Errorf("done called %d times, want %d", calls, n)
	}
	for i := range docs {
		if want := rows(res[i][0]) + ";"; seen[i] != want {
			t.Errorf("document %d: done saw %q, want its result once, %q", i, seen[i], want)
		}
		if timedOut := errors.Is(res[i][0].Err, jsruntime.ErrTimeout); timedOut != (i%10 == 3) {
			t.Errorf("document %d: %v", i, res[i][0].Err)
		}
	}
}
