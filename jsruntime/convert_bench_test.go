package jsruntime

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/dop251/goja"
	"github.com/tidwall/gjson"
)

// The benchmarks below measure the alternatives considered for turning a
// document into a JavaScript value and emitted values into JSON, on the
// indexer's typical document and map function. Each op is one document:
// convert, call function (doc, meta) { emit([doc.type, doc.n], doc.v); },
// encode the emit.

const benchDocJSON = `{"type":"t3","n":123,"v":4.5}`

const benchFn = `(function (doc, meta) { emit([doc.type, doc.n], doc.v); })`

// benchConvert runs the map function over a document converted by conv,
// with emit encoding by encode.
func benchConvert(b *testing.B, conv func(vm *goja.Runtime, dec *jsonDecoder, doc []byte) goja.Value, stringifyEmit bool) {
	doc := []byte(benchDocJSON)
	vm := goja.New()
	enc := newJSONEncoder(vm)
	dec := newJSONDecoder(vm)
	var buf []byte
	stringify, _ := goja.AssertFunction(vm.Get("JSON").ToObject(vm).Get("stringify"))
	emit := func(c goja.FunctionCall) goja.Value {
		if stringifyEmit {
			k, _ := stringify(goja.Undefined(), c.Argument(0))
			v, _ := stringify(goja.Undefined(), c.Argument(1))
			buf = append(append(buf[:0], k.String()...), v.String()...)
		} else {
			buf = enc.appendTop(buf[:0], c.Argument(0), "key")
			buf = enc.appendTop(buf, c.Argument(1), "value")
		}
		return goja.Undefined()
	}
	if err := vm.Set("emit", emit); err != nil {
		b.Fatal(err)
	}
	fv, err := vm.RunString(benchFn)
	if err != nil {
		b.Fatal(err)
	}
	fn, _ := goja.AssertFunction(fv)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := fn(goja.Undefined(), conv(vm, dec, doc), goja.Undefined()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "docs/s")
	if string(buf) != `["t3",123]4.5` {
		b.Fatalf("emitted %s", buf)
	}
}

func convDecoder(_ *goja.Runtime, dec *jsonDecoder, doc []byte) goja.Value {
	v, err := dec.decode(doc)
	if err != nil {
		panic(err)
	}
	return v
}

func convJSONParse(vm *goja.Runtime, _ *jsonDecoder, doc []byte) goja.Value {
	parse, _ := goja.AssertFunction(vm.Get("JSON").ToObject(vm).Get("parse"))
	v, err := parse(goja.Undefined(), vm.ToValue(string(doc)))
	if err != nil {
		panic(err)
	}
	return v
}

func gjsonValue(vm *goja.Runtime, r gjson.Result) goja.Value {
	switch {
	case r.Type == gjson.Null:
		return goja.Null()
	case r.Type == gjson.False || r.Type == gjson.True:
		return vm.ToValue(r.Bool())
	case r.Type == gjson.Number:
		if n, err := strconv.ParseInt(r.Raw, 10, 64); err == nil {
			return vm.ToValue(n)
		}
		return vm.ToValue(r.Num)
	case r.Type == gjson.String:
		return vm.ToValue(r.Str)
	case r.IsArray():
		var items []any
		r.ForEach(func(_, v gjson.Result) bool { items = append(items, gjsonValue(vm, v)); return true })
		return vm.NewArray(items...)
	}
	o := vm.NewObject()
	r.ForEach(func(k, v gjson.Result) bool {
		_ = o.DefineDataProperty(k.Str, gjsonValue(vm, v), goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_TRUE)
		return true
	})
	return o
}

func convGjson(vm *goja.Runtime, _ *jsonDecoder, doc []byte) goja.Value {
	return gjsonValue(vm, gjson.ParseBytes(doc))
}

// convToValueMap wraps a decoded Go map: cheap, but not a JavaScript object
// (key order is lost, for example), so not an option, measured for scale.
func convToValueMap(vm *goja.Runtime, _ *jsonDecoder, doc []byte) goja.Value {
	var m map[string]any
	if err := json.Unmarshal(doc, &m); err != nil {
		panic(err)
	}
	return vm.ToValue(m)
}

func BenchmarkDocConversion(b *testing.B) {
	b.Run("decoder", func(b *testing.B) { benchConvert(b, convDecoder, false) })
	b.Run("JSON.parse", func(b *testing.B) { benchConvert(b, convJSONParse, false) })
	b.Run("gjson", func(b *testing.B) { benchConvert(b, convGjson, false) })
	b.Run("ToValue(map)", func(b *testing.B) { benchConvert(b, convToValueMap, false) })
}

func BenchmarkEmitEncoding(b *testing.B) {
	b.Run("go-encoder", func(b *testing.B) { benchConvert(b, convDecoder, false) })
	b.Run("JSON.stringify", func(b *testing.B) { benchConvert(b, convDecoder, true) })
}

// BenchmarkMeta measures building the meta object, paid per document only
// when a map function mentions meta.
func BenchmarkMeta(b *testing.B) {
	p := NewPool(&Options{Workers: 1})
	defer p.Close()
	pr, err := p.Load([]ViewSource{{Name: "v", Map: "function (doc, meta) { emit(meta.id); }"}})
	if err != nil {
		b.Fatal(err)
	}
	rt, err := newVMState(p, pr)
	if err != nil {
		b.Fatal(err)
	}
	m := Meta{ID: "doc123", Rev: "1-000000367916708a0000000000000000", Seq: 42, VB: 513, Type: TypeJSON}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := rt.newMeta(&m); err != nil {
			b.Fatal(err)
		}
	}
}
