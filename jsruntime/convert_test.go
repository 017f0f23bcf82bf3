package jsruntime

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/dop251/goja"
)

// stringify runs JavaScript's JSON.stringify on v.
func stringify(t testing.TB, vm *goja.Runtime, v goja.Value) string {
	t.Helper()
	f, _ := goja.AssertFunction(vm.Get("JSON").ToObject(vm).Get("stringify"))
	s, err := f(goja.Undefined(), v)
	if err != nil {
		t.Fatalf("JSON.stringify: %v", err)
	}
	return s.String()
}

// TestAppendNumber_MatchesJavaScript compares appendNumber with goja's
// Number.prototype.toString over special and random doubles.
func TestAppendNumber_MatchesJavaScript(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	vals := []float64{1, -1, 20, 0.1, 0.5, 1e21, 1e20, 999999999999999900000, 1e-6, 1e-7, 1.5e-7, 123456789.5,
		1 << 53, 1<<53 + 2, 1 << 60, math.MaxFloat64, math.SmallestNonzeroFloat64, -2.5e-300, 4.35, 100, 1e300}
	for i := 0; i < 2000; i++ {
		vals = append(vals, math.Float64frombits(rng.Uint64()), rng.Float64()*math.Pow(10, float64(rng.IntN(60)-30)))
	}
	vm := goja.New()
	for _, f := range vals {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		got := string(appendNumber(nil, f))
		want := vm.ToValue(f).String()
		if got != want {
			t.Errorf("appendNumber(%v) = %s, JavaScript says %s", f, got, want)
		}
	}
	if got := string(appendNumber(nil, math.Copysign(0, -1))); got != "0" {
		t.Errorf("-0 = %s", got)
	}
}

// TestJSONEncoder_MatchesStringify compares the emit encoder with
// JSON.stringify for values where the two are meant to agree.
func TestJSONEncoder_MatchesStringify(t *testing.T) {
	vm := goja.New()
	enc := newJSONEncoder(vm)
	for _, src := range []string{
		`null`, `true`, `false`, `0`, `-0`, `1.5`, `-1e-7`, `1e21`, `NaN`, `-Infinity`, `"a\"b\\c\n\u0000\u001f\u007f\u2028é😀"`,
		`[]`, `{}`, `[1,[2,[3,[]]]]`, `({b: 1, a: 2, 1: 3, c: undefined, d: function () {}, e: Symbol("s")})`,
		`[undefined, function () {}, Symbol("x"), null]`, `new Date(86400000)`, `({toJSON: function (k) { return [k, 1]; }})`,
		`({x: {toJSON: function (k) { return k + "!"; }}})`, `[new Number(1.5), new String("s"), new Boolean(false), new Boolean(true)]`,
		`(function () { return arguments; })(1, "two")`, `Object.create({inherited: 1}, {own: {value: 2, enumerable: true}, hidden: {value: 3}})`,
		`new Error("e")`, `/re/g`, `new Map([[1, 2]])`, `[1.0, 2.50, 1e300, 5e-324]`, `({get g() { return "got"; }})`,
		`(function () { var a = [1, 2, 3]; a.extra = 1; return a; })()`, `[, 1, , 2]`, `"\ud83d\ude00"`,
		`({"__proto__": 1})`, `JSON.parse('{"__proto__": {"a": 1}}')`,
	} {
		v, err := vm.RunString("(" + src + ")")
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		var got []byte
		if ex := vm.Try(func() { got = enc.appendTop(nil, v, "value") }); ex != nil {
			t.Errorf("%s: %v", src, ex)
			continue
		}
		if want := stringify(t, vm, v); string(got) != want {
			t.Errorf("%s: got %s, JSON.stringify says %s", src, got, want)
		}
	}
}

func TestJSONEncoder_Errors(t *testing.T) {
	vm := goja.New()
	enc := newJSONEncoder(vm)
	for _, src := range []string{
		`(function () {})`, `(function () { var a = []; a.push(a); return a; })()`, `10n`, `[1n]`,
		`(function () { var o = {}; for (var i = 0; i < 1100; i++) { o = {o: o}; } return o; })()`,
	} {
		v, err := vm.RunString("(" + src + ")")
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		ex := vm.Try(func() { enc.appendTop(nil, v, "key") })
		if ex == nil || !strings.Contains(ex.Value().String(), "TypeError") {
			t.Errorf("%s: got %v, want a TypeError", src, ex)
		}
	}
	// Undefined and symbols at the top are null.
	for _, src := range []string{`undefined`, `Symbol("s")`} {
		v, _ := vm.RunString(src)
		if got := string(enc.appendTop(nil, v, "key")); got != "null" {
			t.Errorf("%s: got %s", src, got)
		}
	}
}

// checkDecode compares the decoder with JSON.parse on data.
func checkDecode(t *testing.T, vm *goja.Runtime, dec *jsonDecoder, data string) {
	t.Helper()
	parse, _ := goja.AssertFunction(vm.Get("JSON").ToObject(vm).Get("parse"))
	want, perr := parse(goja.Undefined(), vm.ToValue(data))
	got, derr := dec.decode([]byte(data))
	if strings.Count(data, "[")+strings.Count(data, "{") > maxJSONDepth {
		return // JSON.parse has no depth limit; the decoder does
	}
	if perr != nil && strings.Contains(perr.Error(), "cannot unmarshal number") {
		return // goja's JSON.parse (encoding/json) refuses 1e400; JavaScript gives Infinity, as the decoder does
	}
	if (perr == nil) != (derr == nil) {
		t.Fatalf("%q: JSON.parse error %v, decoder error %v", data, perr, derr)
	}
	if perr != nil {
		return
	}
	if g, w := stringify(t, vm, got), stringify(t, vm, want); g != w {
		t.Fatalf("%q: decoder gives %s, JSON.parse %s", data, g, w)
	}
}

// decodeSeeds are JSON texts, valid and not, for the decoder tests.
func decodeSeeds() []string {
	return []string{
		`{"type":"t3","n":123,"v":4.5}`, `null`, `true`, `false`, `0`, `-0`, `-1.5e+10`, `1E400`, `-1e-400`, `123456789012345678901234567890`,
		`"\u00e9\ud83d\ude00\ud800x\\\/\b\f\n\r\t"`, `[]`, `{}`, `[[[]]]`, `{"a":{"b":[1,{"c":null}]}}`, ` { "a" : 1 , "a" : 2 } `,
		`{"__proto__":{"x":1}}`, `{"constructor":1,"toString":2,"hasOwnProperty":3}`, `"é\xff\xfe"`, `[1,2,3,4,5,6,7,8,9,10]`,
		`{`, `}`, `[1,]`, `{"a":1,}`, `01`, `1.`, `.5`, `-`, `1e`, `+1`, `"\x01"`, `"\u12"`, `"\q"`, `nul`, `truee`, `[1 2]`, `{"a" 1}`, `{1:2}`,
		`"abc`, `[`, ``, `   `, `1 2`, `NaN`, `Infinity`, `'a'`, "\"\t\"",
	}
}

func TestJSONDecoder_MatchesParse(t *testing.T) {
	vm := goja.New()
	dec := newJSONDecoder(vm)
	for _, s := range decodeSeeds() {
		checkDecode(t, vm, dec, s)
	}
	// Deep nesting is refused, not a crash.
	deep := strings.Repeat("[", 100000) + strings.Repeat("]", 100000)
	if _, err := dec.decode([]byte(deep)); err == nil {
		t.Error("deeply nested document accepted")
	}
	// The decoder is reusable after an error, and interns consistently.
	for i := 0; i < 3; i++ {
		checkDecode(t, vm, dec, `{"type":"t3","n":123,"v":4.5,"s":"short"}`)
	}
}

func FuzzJSONDecoder(f *testing.F) {
	for _, s := range decodeSeeds() {
		f.Add(s)
	}
	vm := goja.New()
	dec := newJSONDecoder(vm)
	f.Fuzz(func(t *testing.T, s string) {
		checkDecode(t, vm, dec, s)
	})
}

func TestUsesParam(t *testing.T) {
	for _, tc := range []struct {
		src             string
		usesDoc, usesMD bool
	}{
		{`function (doc, meta) { emit(doc.type, null); }`, true, false},
		{`function (doc, meta) { emit(meta.id, null); }`, false, true},
		{`function (doc, meta) { }`, false, false},
		{`function (d) { emit(d.metadata); }`, true, false},
		{`function (doc, meta) { emit(doc_id); emit(metaphor); }`, false, false},
		{`function (doc, meta) { emit("doc"); }`, true, false}, // a false "yes" is fine
		{`function () { emit(arguments[0]); }`, true, true},
		{`function (doc, meta) { eval("1"); }`, true, true},
		{`function (doc, meta) { emit(\u0064oc); }`, true, true},
		{`function ({type}, meta) { emit(type); }`, true, true},
		{`function (doc, meta = {}) { }`, true, true},
		{`function (...args) { }`, true, true},
		{`(doc) => emit(doc.x)`, true, false},
		{`doc => emit(1)`, false, false},
		{`function (doc, meta) { var f = function (meta) { return meta; }; emit(doc); }`, true, true},
	} {
		cf, err := compileFunction("v", funcMap, tc.src)
		if err != nil {
			t.Fatalf("%s: %v", tc.src, err)
		}
		if cf.usesParam(0) != tc.usesDoc || cf.usesParam(1) != tc.usesMD {
			t.Errorf("%s: uses doc %v meta %v, want %v %v", tc.src, cf.usesParam(0), cf.usesParam(1), tc.usesDoc, tc.usesMD)
		}
	}
}
