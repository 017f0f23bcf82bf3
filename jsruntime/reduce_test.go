package jsruntime_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/jsruntime"
)

// reducer loads a one-view program with the given reduce and returns it.
func reducer(t testing.TB, p *jsruntime.Pool, reduce string) jsruntime.Reducer {
	t.Helper()
	pr := load(t, p, jsruntime.ViewSource{Name: "v", Map: "function (doc) { emit(doc.k, doc.v); }", Reduce: reduce})
	r, err := pr.Reducer("v")
	if err != nil || r == nil {
		t.Fatalf("Reducer: %v, %v", r, err)
	}
	return r
}

// raw turns JSON strings into [][]byte.
func raw(vals ...string) [][]byte {
	out := make([][]byte, len(vals))
	for i, v := range vals {
		out[i] = []byte(v)
	}
	return out
}

// reduceAll reduces values with made-up keys and ids.
func reduceAll(r jsruntime.Reducer, values [][]byte) ([]byte, error) {
	keys := make([][]byte, len(values))
	ids := make([]string, len(values))
	for i := range values {
		keys[i] = []byte(fmt.Sprintf(`["k",%d]`, i))
		ids[i] = fmt.Sprintf("doc%d", i)
	}
	return r.Reduce(context.Background(), keys, ids, values)
}

func TestReducer_NoneAndUnknown(t *testing.T) {
	p := newPool(t, nil)
	pr := load(t, p, jsruntime.ViewSource{Name: "plain", Map: "function () {}"})
	if r, err := pr.Reducer("plain"); r != nil || err != nil {
		t.Errorf("map-only view: %v, %v", r, err)
	}
	if _, err := pr.Reducer("nope"); !errors.Is(err, jsruntime.ErrNoView) {
		t.Errorf("unknown view: %v", err)
	}
}

func TestReduce_Builtins(t *testing.T) {
	p := newPool(t, nil)
	for _, tc := range []struct {
		reduce   string
		values   []string
		rereduce bool
		want     string
	}{
		{"_count", []string{`1`, `"a"`, `null`, `{"x":1}`}, false, `4`},
		{"_count", nil, false, `0`},
		{"_count", []string{`4`, `0`, `16`}, true, `20`},
		{"_sum", []string{`1`, `2`, `3`, `14`}, false, `20`},
		{"_sum", []string{`1.5`, `2.5`, `-1`}, false, `3`},
		{"_sum", []string{`0.1`, `0.2`}, false, `0.30000000000000004`},
		{"_sum", []string{`1e21`, `1`}, false, `1e+21`},
		{"_sum", nil, false, `0`},
		{"_sum", []string{`9007199254740993`, `1`}, false, `9007199254740994`},
		{"_sum", []string{`9223372036854775807`, `1`}, false, `9223372036854776000`},
		{"_sum", []string{`20`, `22`}, true, `42`},
		{"_sum", []string{`[1,1]`, `[2]`}, true, `[3,1]`},
		{"_stats", []string{`7000`, `19000`, `17000`}, false, `{"sum":43000,"count":3,"min":7000,"max":19000,"sumsqr":699000000}`},
		{"_stats", []string{`-1.5`, `2`}, false, `{"sum":0.5,"count":2,"min":-1.5,"max":2,"sumsqr":6.25}`},
		{"_stats", nil, false, `{}`},
		{"_stats", []string{`{"sum":3,"count":2,"min":1,"max":2,"sumsqr":5}`, `{}`, `{"max":10,"min":10,"count":1,"sum":10,"sumsqr":100}`}, true, `{"sum":13,"count":3,"min":1,"max":10,"sumsqr":105}`},
	} {
		t.Run(fmt.Sprintf("%s%v", tc.reduce, tc.values), func(t *testing.T) {
			r := reducer(t, p, tc.reduce)
			var out []byte
			var err error
			if tc.rereduce {
				out, err = r.Rereduce(context.Background(), raw(tc.values...))
			} else {
				out, err = reduceAll(r, raw(tc.values...))
			}
			if err != nil || string(out) != tc.want {
				t.Errorf("got %s, %v; want %s", out, err, tc.want)
			}
		})
	}
}

func TestReduce_BuiltinsIgnoreKeys(t *testing.T) {
	p := newPool(t, nil)
	for red, want := range map[string]string{"_count": "2", "_sum": "3", "_stats": `{"sum":3,"count":2,"min":1,"max":2,"sumsqr":5}`} {
		out, err := reducer(t, p, red).Reduce(context.Background(), nil, nil, raw("1", "2"))
		if err != nil || string(out) != want {
			t.Errorf("%s without keys: %s %v, want %s", red, out, err, want)
		}
	}
}

func TestReduce_BuiltinBadInput(t *testing.T) {
	p := newPool(t, nil)
	for _, tc := range []struct {
		reduce   string
		values   []string
		rereduce bool
	}{
		{"_sum", []string{`1`, `"2"`}, false},
		{"_sum", []string{`{"a":1}`}, false},
		{"_sum", []string{`[1,"x"]`}, false},
		{"_sum", []string{`null`}, false},
		{"_sum", []string{`true`}, true},
		{"_sum", []string{`01`}, false},
		{"_stats", []string{`"x"`}, false},
		{"_stats", []string{`[1,2]`, `[1]`}, false},
		{"_stats", []string{`1`, `[1]`}, false},
		{"_sum", []string{`[1,2]`}, false},
		{"_sum", []string{`[]`}, false},
		{"_stats", []string{`[1,10]`}, false},
		{"_stats", []string{`{"sum":3,"count":2,"min":1,"max":2,"sumsqr":5}`}, false},
		{"_stats", []string{`null`}, false},
		{"_stats", []string{`{"sum":1}`}, true},
		{"_count", []string{`"3"`}, true},
	} {
		r := reducer(t, p, tc.reduce)
		var err error
		if tc.rereduce {
			_, err = r.Rereduce(context.Background(), raw(tc.values...))
		} else {
			_, err = reduceAll(r, raw(tc.values...))
		}
		if !errors.Is(err, jsruntime.ErrReduceInput) {
			t.Errorf("%s %v: got %v, want ErrReduceInput", tc.reduce, tc.values, err)
			continue
		}
		if !strings.Contains(err.Error(), tc.reduce) || !strings.Contains(err.Error(), "view v") {
			t.Errorf("error does not name the reduce and view: %v", err)
		}
	}
	_, err := reduceAll(reducer(t, p, "_sum"), raw(`1`, `"abc"`))
	if err == nil || !strings.Contains(err.Error(), `"abc"`) {
		t.Errorf("error does not name the bad value: %v", err)
	}
	// Couchbase's text, with the row's key and document.
	_, err = reducer(t, p, "_stats").Reduce(context.Background(), raw(`"ann"`, `"bo"`), []string{"g1", "g2"}, raw(`3`, `null`))
	var be *jsruntime.BuiltinReduceError
	if !errors.As(err, &be) || be.Reason() != "Builtin _stats function requires map values to be numbers" ||
		be.View != "v" || be.Key != `"bo"` || be.DocID != "g2" || be.Value != "null" {
		t.Errorf("got %#v (%v)", be, err)
	}
}

// TestReduce_RereduceConsistency checks reduce(all) == rereduce(reduce(part),
// reduce(rest)) for every reduce, over random values and splits.
func TestReduce_RereduceConsistency(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	p := newPool(t, nil)
	gens := map[string]func() string{
		"ints":   func() string { return fmt.Sprint(rng.IntN(2001) - 1000) },
		"halves": func() string { return fmt.Sprint(float64(rng.IntN(2001)-1000) / 2) },
		"arrays": func() string { return fmt.Sprintf("[%d,%d,%d]", rng.IntN(100), -rng.IntN(100), rng.IntN(7)) },
	}
	reduces := map[string][]string{
		"_count": {"ints", "halves", "arrays"},
		"_sum":   {"ints", "halves"},
		"_stats": {"ints", "halves"},
		`function (keys, values, rereduce) {
			var s = 0, n = 0;
			for (var i = 0; i < values.length; i++) {
				if (rereduce) { s += values[i].s; n += values[i].n; } else { s += values[i]; n++; }
			}
			return {s: s, n: n};
		}`: {"ints", "halves"},
	}
	for red, kinds := range reduces {
		r := reducer(t, p, red)
		for _, kind := range kinds {
			for trial := 0; trial < 20; trial++ {
				n := 1 + rng.IntN(40)
				vals := make([]string, n)
				for i := range vals {
					vals[i] = gens[kind]()
				}
				all, err := reduceAll(r, raw(vals...))
				if err != nil {
					t.Fatalf("%s %s: reduce: %v", red, kind, err)
				}
				// Split into up to four parts, reduce each, rereduce.
				var parts [][]byte
				for rest := vals; len(rest) > 0; {
					k := 1 + rng.IntN(len(rest))
					part, err := reduceAll(r, raw(rest[:k]...))
					if err != nil {
						t.Fatal(err)
					}
					parts = append(parts, part)
					rest = rest[k:]
				}
				re, err := r.Rereduce(context.Background(), parts)
				if err != nil {
					t.Fatalf("%s %s: rereduce %s: %v", red, kind, parts, err)
				}
				// Rereducing a single reduction changes nothing either.
				once, err := r.Rereduce(context.Background(), [][]byte{all})
				if err != nil {
					t.Fatal(err)
				}
				if string(all) != string(re) || string(all) != string(once) {
					t.Errorf("%.20s %s: reduce(all) = %s, rereduce(parts %s) = %s, rereduce(all) = %s",
						red, kind, all, parts, re, once)
				}
			}
		}
	}
}

func TestReduce_JavaScript(t *testing.T) {
	p := newPool(t, nil)
	r := reducer(t, p, `function (keys, values, rereduce) {
		return {keys: keys, values: values, rereduce: rereduce, total: sum(values.map(function (v) { return v.n || v.total || 0; }))};
	}`)
	out, err := r.Reduce(context.Background(), raw(`["a",1]`, `"b"`), []string{"doc1", "doc2"}, raw(`{"n":1}`, `{"n":2.5}`))
	want := `{"keys":[[["a",1],"doc1"],["b","doc2"]],"values":[{"n":1},{"n":2.5}],"rereduce":false,"total":3.5}`
	if err != nil || string(out) != want {
		t.Errorf("reduce:\n got %s %v\nwant %s", out, err, want)
	}
	out, err = r.Rereduce(context.Background(), raw(`{"total":3.5}`, `{"total":1}`))
	want = `{"keys":null,"values":[{"total":3.5},{"total":1}],"rereduce":true,"total":4.5}`
	if err != nil || string(out) != want {
		t.Errorf("rereduce:\n got %s %v\nwant %s", out, err, want)
	}
	// Keys reached through arguments are built too.
	out, err = reducer(t, p, "function () { return arguments[0]; }").Reduce(context.Background(), raw(`1`), []string{"d"}, raw(`2`))
	if err != nil || string(out) != `[[1,"d"]]` {
		t.Errorf("keys through arguments: %s %v", out, err)
	}
	// undefined becomes null; integers print without a fraction.
	if out, err := reducer(t, p, "function () {}").Rereduce(context.Background(), nil); err != nil || string(out) != "null" {
		t.Errorf("undefined result: %s %v", out, err)
	}
	if out, err := reducer(t, p, "function (k, v) { return v.length * 10.0; }").Rereduce(context.Background(), raw("1", "2")); err != nil || string(out) != "20" {
		t.Errorf("integer result: %s %v", out, err)
	}
	// Mismatched lengths are the caller's error.
	if _, err := r.Reduce(context.Background(), raw(`1`), nil, raw(`1`)); err == nil {
		t.Error("reduce with missing ids succeeded")
	}
	// emit is for map functions.
	if _, err := reducer(t, p, "function () { emit(1); }").Rereduce(context.Background(), nil); err == nil {
		t.Error("emit in a reduce succeeded")
	}
}

func TestReduce_JavaScriptErrors(t *testing.T) {
	// Long enough that a busy machine does not cut off the reduces that
	// do not loop.
	p := newPool(t, &jsruntime.Options{Timeout: 500 * time.Millisecond})
	var se *jsruntime.ScriptError
	_, err := reducer(t, p, `function () { throw new RangeError("nope"); }`).Rereduce(context.Background(), nil)
	if !errors.As(err, &se) || se.View != "v" || se.Func != "reduce" || se.Msg != "RangeError: nope" {
		t.Errorf("throw: %v", err)
	}
	r := reducer(t, p, `function (k, values) { if (values[0] == 1) { while (true) {} } return values.length; }`)
	if _, err := r.Rereduce(context.Background(), raw(`1`)); !errors.Is(err, jsruntime.ErrTimeout) || !errors.As(err, &se) {
		t.Errorf("loop: %v, want ErrTimeout", err)
	}
	if out, err := r.Rereduce(context.Background(), raw(`2`, `3`)); err != nil || string(out) != "2" {
		t.Errorf("after timeout: %s %v", out, err)
	}
	// The result's toJSON runs under the time limit too.
	_, err = reducer(t, p, `function () { return {toJSON: function () { while (true) {} }}; }`).Rereduce(context.Background(), nil)
	if !errors.Is(err, jsruntime.ErrTimeout) {
		t.Errorf("toJSON loop: %v", err)
	}
	_, err = reducer(t, p, `function () { return function () {}; }`).Rereduce(context.Background(), nil)
	if !errors.As(err, &se) {
		t.Errorf("function result: %v", err)
	}
	// Invalid input JSON.
	if _, err := r.Rereduce(context.Background(), raw(`{`)); !errors.Is(err, jsruntime.ErrInvalidJSON) {
		t.Errorf("bad JSON: %v", err)
	}
	// A cancelled context.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Rereduce(ctx, raw(`2`)); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

func TestReduce_SizeLimit(t *testing.T) {
	p := newPool(t, nil)
	r := reducer(t, p, `function (k, values) { return "x".repeat(values[0]); }`)
	if out, err := r.Rereduce(context.Background(), raw(`65533`)); err != nil || len(out) != jsruntime.MaxReductionSize {
		t.Errorf("largest allowed: %d bytes, %v", len(out), err)
	}
	_, err := r.Rereduce(context.Background(), raw(`65534`))
	var se *jsruntime.ScriptError
	if !errors.Is(err, jsruntime.ErrReductionTooLarge) || !errors.As(err, &se) || se.View != "v" {
		t.Errorf("over the limit: %v", err)
	}
	// Built-ins are held to it as well (their map input is numbers only;
	// only a rereduce can be handed something this big).
	big := "[" + strings.Repeat("1,", 40000) + "1]"
	if _, err := reducer(t, p, "_sum").Rereduce(context.Background(), raw(big, big)); !errors.Is(err, jsruntime.ErrReductionTooLarge) {
		t.Errorf("_sum of a huge array: %v", err)
	}
}

func TestReduce_OutputIsValidJSON(t *testing.T) {
	p := newPool(t, nil)
	for _, red := range []string{"_count", "_sum", "_stats"} {
		out, err := reduceAll(reducer(t, p, red), raw(`1.5e300`, `1.5e300`, `-2e-9`))
		if err != nil {
			t.Fatal(err)
		}
		if !json.Valid(out) {
			t.Errorf("%s: invalid JSON %s", red, out)
		}
	}
}
