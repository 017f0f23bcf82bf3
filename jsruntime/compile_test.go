package jsruntime_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/jsruntime"
)

func TestCompile_Valid(t *testing.T) {
	err := jsruntime.Compile([]jsruntime.ViewSource{
		{Name: "a", Map: "function (doc, meta) { emit(doc.type, null); }", Reduce: "_count"},
		{Name: "b", Map: "\n  function(doc) {\n emit(doc.n)\n }\n  // trailing comment", Reduce: " _sum\n"},
		{Name: "c", Map: "(function (doc) { emit(1); })", Reduce: "_stats"},
		{Name: "d", Map: "(doc, meta) => { emit(meta.id); }", Reduce: "function (keys, values, rereduce) { return values.length; }"},
		{Name: "e", Map: "function named(doc) { 'use strict'; emit(doc); }", Reduce: "  "},
	})
	if err != nil {
		t.Errorf("Compile: %v", err)
	}
	if err := jsruntime.Compile(nil); err != nil {
		t.Errorf("Compile(nil): %v", err)
	}
}

func TestCompile_SyntaxErrorNamesViewAndLine(t *testing.T) {
	for _, tc := range []struct {
		name  string
		views []jsruntime.ViewSource
		view  string
		fn    string
		line  int
	}{
		{"map", []jsruntime.ViewSource{
			{Name: "good", Map: "function (doc) { emit(1); }"},
			{Name: "bad", Map: "function (doc, meta) {\n  var x = 1;\n  emit(doc.a,, x);\n}"},
		}, "bad", "map", 3},
		{"map first line", []jsruntime.ViewSource{{Name: "v", Map: "function (doc { }"}}, "v", "map", 1},
		{"unterminated", []jsruntime.ViewSource{{Name: "v", Map: "function (doc) {\n emit(1);\n"}}, "v", "map", 3},
		{"reduce", []jsruntime.ViewSource{{Name: "r", Map: "function (doc) { emit(1); }", Reduce: "function (k, v, re) {\n\n return v.length +;\n}"}}, "r", "reduce", 3},
		{"strict mode", []jsruntime.ViewSource{{Name: "s", Map: "function (doc) {\n'use strict';\nwith (doc) {}\n}"}}, "s", "map", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := jsruntime.Compile(tc.views)
			var ce *jsruntime.CompileError
			if !errors.As(err, &ce) {
				t.Fatalf("got %v, want a *CompileError", err)
			}
			if ce.View != tc.view || ce.Func != tc.fn || ce.Line != tc.line || !strings.HasPrefix(ce.Msg, "SyntaxError: ") {
				t.Errorf("got %+v, want view %s, func %s, line %d", ce, tc.view, tc.fn, tc.line)
			}
			if !strings.Contains(err.Error(), "view "+tc.view) || !strings.Contains(err.Error(), "SyntaxError") {
				t.Errorf("Error() = %q", err.Error())
			}
			// Load reports the same error.
			if _, err := newPool(t, nil).Load(tc.views); !errors.As(err, &ce) {
				t.Errorf("Load: %v", err)
			}
		})
	}
}

func TestCompile_UnexpectedEnd(t *testing.T) {
	err := jsruntime.Compile([]jsruntime.ViewSource{{Name: "v", Map: "function (doc) {\n  emit(doc.a);\n"}})
	var ce *jsruntime.CompileError
	if !errors.As(err, &ce) || ce.Msg != "SyntaxError: Unexpected end of input" || ce.Line != 3 {
		t.Errorf("got %+v", err)
	}
}

func TestCompile_NotAFunction(t *testing.T) {
	for _, src := range []string{
		"",
		"   \n",
		"emit(1)",
		"1 + 1",
		"function (doc) {}; function (doc) {}",
		"function (doc) { emit(1); }) + (function () { while (true) {} }",
		"var f = function (doc) {};",
		"async function (doc) { emit(1); }",
		"function* (doc) { yield 1; }",
		"{}",
	} {
		err := jsruntime.Compile([]jsruntime.ViewSource{{Name: "v", Map: src}})
		var ce *jsruntime.CompileError
		if !errors.As(err, &ce) || ce.View != "v" || ce.Func != "map" {
			t.Errorf("%q: got %v, want a *CompileError for view v map", src, err)
			continue
		}
		// Some of these do not even parse; those that do are ErrNotFunction.
		if !errors.Is(err, jsruntime.ErrNotFunction) && !strings.HasPrefix(ce.Msg, "SyntaxError") {
			t.Errorf("%q: got %v", src, err)
		}
	}
	err := jsruntime.Compile([]jsruntime.ViewSource{{Name: "v", Map: "function () {}", Reduce: "values.length"}})
	var ce *jsruntime.CompileError
	if !errors.As(err, &ce) || ce.Func != "reduce" || !errors.Is(err, jsruntime.ErrNotFunction) {
		t.Errorf("reduce expression: got %v", err)
	}
}

func TestCompile_UnknownBuiltinReduce(t *testing.T) {
	err := jsruntime.Compile([]jsruntime.ViewSource{{Name: "v", Map: "function (doc) { emit(1); }", Reduce: "_median"}})
	var ce *jsruntime.CompileError
	if !errors.Is(err, jsruntime.ErrUnknownBuiltin) || !errors.As(err, &ce) {
		t.Fatalf("got %v, want ErrUnknownBuiltin", err)
	}
	if ce.View != "v" || ce.Func != "reduce" || !strings.Contains(ce.Msg, "_median") {
		t.Errorf("got %+v", ce)
	}
	// CouchDB's other built-ins are not Couchbase's.
	for _, red := range []string{"_approx_count_distinct", "_count_", "_COUNT", "_"} {
		if err := jsruntime.Compile([]jsruntime.ViewSource{{Name: "v", Map: "function () {}", Reduce: red}}); !errors.Is(err, jsruntime.ErrUnknownBuiltin) {
			t.Errorf("%s: got %v", red, err)
		}
	}
}

func TestCompile_DuplicateViewName(t *testing.T) {
	err := jsruntime.Compile([]jsruntime.ViewSource{{Name: "v", Map: "function () {}"}, {Name: "v", Map: "function () {}"}})
	var ce *jsruntime.CompileError
	if !errors.As(err, &ce) || ce.View != "v" {
		t.Errorf("got %v", err)
	}
}
