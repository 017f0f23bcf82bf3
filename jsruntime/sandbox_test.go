package jsruntime_test

import (
	"context"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/jsruntime"
)

// mapAll maps docs with pr and renders every result, document by document
// and view by view.
func mapAll(t *testing.T, pr *jsruntime.Program, docs []jsruntime.Doc) []string {
	t.Helper()
	res, err := pr.Map(context.Background(), docs)
	if err != nil {
		t.Fatalf("Map: %v", err)
	}
	var out []string
	for _, r := range res {
		for _, vr := range r {
			out = append(out, rows(vr))
		}
	}
	return out
}

// One worker, so that every document goes through the same runtime.
var oneWorker = &jsruntime.Options{Workers: 1}

func TestNoStateLeaksBetweenDocuments(t *testing.T) {
	cases := []struct {
		name string
		maps []string // views, in order; the first one attacks
		want string   // what the last view emits for document "b" (mapped after "a")
	}{
		{"global counter",
			[]string{`function (doc, meta) { if (typeof n === "undefined") { n = 0; } n++; emit(meta.id, n); }`},
			`error: jsruntime: view a: map: ReferenceError: n is not defined`},
		{"this counter",
			[]string{`function (doc, meta) { this.n = (this.n || 0) + 1; emit(meta.id, this.n || 0); }`},
			`"b"=0`},
		{"function property",
			[]string{`function f(doc, meta) { f.n = (f.n || 0) + 1; emit(meta.id, f.n || 0); }`},
			`"b"=0`},
		{"emit replaced",
			[]string{`function (doc, meta) { emit = function () {}; }`, `function (doc, meta) { emit(meta.id, 1); }`},
			`"b"=1`},
		{"Object.prototype",
			[]string{`function (doc, meta) { Object.prototype.x = 1; }`, `function (doc, meta) { emit(meta.id, ({}).x === undefined); }`},
			`"b"=true`},
		{"Array.prototype.push",
			[]string{`function (doc, meta) { Array.prototype.push = null; }`, `function (doc, meta) { var a = []; a.push(1); emit(meta.id, a); }`},
			`"b"=[1]`},
		{"JSON.stringify",
			[]string{`function (doc, meta) { JSON.stringify = function () { return "x"; }; }`, `function (doc, meta) { emit(meta.id, JSON.stringify([1])); }`},
			`"b"="[1]"`},
		{"Math",
			[]string{`function (doc, meta) { Math.max = Math.min; }`, `function (doc, meta) { emit(meta.id, Math.max(1, 2)); }`},
			`"b"=2`},
		{"sum",
			[]string{`function (doc, meta) { sum = function () { return 0; }; }`, `function (doc, meta) { emit(meta.id, sum([1, 2])); }`},
			`"b"=3`},
		{"log and dateToArray",
			[]string{`function (doc, meta) { log = null; dateToArray = null; decodeBase64 = null; }`, `function (doc, meta) { log("x"); emit(meta.id, dateToArray(0)); }`},
			`"b"=[1970,1,1,0,0,0]`},
		{"Array iterator",
			[]string{`function (doc, meta) { Object.getPrototypeOf([][Symbol.iterator]()).next = function () { return {done: true}; }; }`,
				`function (doc, meta) { var n = 0; for (var x of [1, 2]) n += x; emit(meta.id, n); }`},
			`"b"=3`},
		{"String.prototype",
			[]string{`function (doc, meta) { String.prototype.toUpperCase = function () { return "no"; }; delete String.prototype.trim; }`,
				`function (doc, meta) { emit(meta.id, " a ".trim().toUpperCase()); }`},
			`"b"="A"`},
		{"Object.prototype.toString",
			[]string{`function (doc, meta) { Object.prototype.toString = function () { return "hacked"; }; Error.prototype.name = "Hacked"; }`,
				`function (doc, meta) { emit(meta.id, [String({}), String(new Error("e"))]); }`},
			`"b"=["[object Object]","Error: e"]`},
		{"globalThis",
			[]string{`function (doc, meta) { globalThis.emit = null; Object.defineProperty(globalThis, "q", {value: 1}); }`,
				`function (doc, meta) { emit(meta.id, typeof q); }`},
			`"b"="undefined"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newPool(t, oneWorker)
			var vs []jsruntime.ViewSource
			for i, m := range c.maps {
				vs = append(vs, jsruntime.ViewSource{Name: string(rune('a' + i)), Map: m})
			}
			pr := load(t, p, vs...)
			// The documents in separate calls and in one.
			mapAll(t, pr, []jsruntime.Doc{jsonDoc("a", `{}`)})
			got := mapAll(t, pr, []jsruntime.Doc{jsonDoc("b", `{}`)})
			if last := got[len(got)-1]; last != c.want {
				t.Errorf("after an earlier document: %s, want %s", last, c.want)
			}
			got = mapAll(t, pr, []jsruntime.Doc{jsonDoc("a", `{}`), jsonDoc("b", `{}`)})
			if last := got[len(got)-1]; last != c.want {
				t.Errorf("in one batch: %s, want %s", last, c.want)
			}
		})
	}
}

// Indexing the same documents in two orders gives the same rows.
func TestIndexingOrderDoesNotMatter(t *testing.T) {
	src := `function (doc, meta) {
		if (typeof seen === "undefined") { seen = {}; }
		try { seen[meta.id] = true; } catch (e) {}
		var n = 0;
		try { for (var k in seen) n++; } catch (e) { n = -1; }
		Object.prototype.last = meta.id;
		emit(meta.id, [n, ({}).last === undefined]);
	}`
	var docs []jsruntime.Doc
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		docs = append(docs, jsonDoc(id, `{}`))
	}
	render := func(docs []jsruntime.Doc) map[string]string {
		p := newPool(t, oneWorker)
		pr := load(t, p, jsruntime.ViewSource{Name: "v", Map: src})
		got := map[string]string{}
		for i, r := range mapAll(t, pr, docs) {
			got[docs[i].Meta.ID] = r
		}
		return got
	}
	fwd := render(docs)
	rev := make([]jsruntime.Doc, len(docs))
	for i, d := range docs {
		rev[len(docs)-1-i] = d
	}
	bwd := render(rev)
	for id, r := range fwd {
		if bwd[id] != r {
			t.Errorf("document %s: %s in one order, %s in the other", id, r, bwd[id])
		}
	}
}

// Local variables, objects of the function's own and the usual built-ins
// still work in a frozen environment.
func TestFrozenEnvironmentStillUsable(t *testing.T) {
	p := newPool(t, oneWorker)
	pr := load(t, p, jsruntime.ViewSource{Name: "v", Map: `function (doc, meta) {
		var total = 0, o = {a: 1}, a = [3, 1, 2];
		o.b = 2; a.push(0); a.sort();
		function F() { this.x = 1; }
		F.prototype.y = 2;
		var f = new F();
		class C { constructor() { this.z = 3; } }
		var m = new Map([[1, 2]]);
		for (var k in o) total += o[k];
		// Assigning what a frozen prototype has works for the usual victims.
		F.prototype.toString = function () { return "F!"; };
		var e = new Error(); e.name = "MyError"; e.message = "m";
		var o2 = {}; o2.toString = function () { return "o2"; }; o2.constructor = F;
		emit([total, a, f.x + f.y, new C().z, m.get(1), "ab".toUpperCase(), /b/.test("abc"), JSON.parse("[1]")[0],
			String(f), String(e), String(o2), o2.constructor === F, String({}), ({}).constructor === Object,
			Object.prototype.toString.call([])], doc.k);
	}`})
	got := mapAll(t, pr, []jsruntime.Doc{jsonDoc("a", `{"k":"v","constructor":1,"toString":2}`)})
	if want := `[3,[0,1,2,3],3,3,2,"AB",true,1,"F!","MyError: m","o2",true,"[object Object]",true,"[object Array]"]="v"`; strings.Join(got, "|") != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// Everything a map function can reach is frozen: walked from the global
// object, the function itself, the helpers, and the prototypes of
// iterators, generators and async functions, through prototypes and every
// own property's value, getter and setter, names and symbols alike (the
// walk that freezes a runtime runs in Go, freezer.freezeFrom; this is the
// map function's own view of the result). goja's Object.Symbols lists only
// enumerable symbols: a walk through it left the built-ins' symbol-keyed
// methods (Symbol.iterator, Symbol.species, ...) unfrozen.
func TestEveryReachableObjectIsFrozen(t *testing.T) {
	p := newPool(t, oneWorker)
	pr := load(t, p, jsruntime.ViewSource{Name: "v", Map: `function walk(doc, meta) {
		var todo = [globalThis, walk, emit, log, sum, dateToArray, decodeBase64,
			Object.getPrototypeOf([][Symbol.iterator]()), Object.getPrototypeOf(new Map()[Symbol.iterator]()),
			Object.getPrototypeOf(function* () {}), Object.getPrototypeOf(Object.getPrototypeOf(function* () {}())),
			Object.getPrototypeOf(async function () {}), Object.getPrototypeOf(Int8Array)];
		var seen = new Set(), unfrozen = [];
		while (todo.length > 0) {
			var o = todo.pop();
			if (o === null || (typeof o !== "object" && typeof o !== "function") || seen.has(o)) continue;
			seen.add(o);
			if (!Object.isFrozen(o)) unfrozen.push(typeof o + " " + (typeof o.name === "string" ? o.name : "") + " " + Object.prototype.toString.call(o));
			todo.push(Object.getPrototypeOf(o));
			var keys = Object.getOwnPropertyNames(o).concat(Object.getOwnPropertySymbols(o));
			for (var i = 0; i < keys.length; i++) {
				var d = Object.getOwnPropertyDescriptor(o, keys[i]);
				todo.push(d.value, d.get, d.set);
			}
		}
		emit(seen.size > 400, unfrozen);
	}`})
	got := mapAll(t, pr, []jsruntime.Doc{jsonDoc("a", `{}`)})
	if want := `true=[]`; strings.Join(got, "|") != want {
		t.Errorf("got %s, want %s (more than 400 objects reached, none unfrozen)", got, want)
	}
}
