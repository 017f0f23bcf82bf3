package jsruntime

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/dop251/goja"
	"github.com/dop251/goja/parser"
)

// vmState is one goja runtime holding one Program's functions, owned by one
// worker. It carries the state of the call in progress for the native
// helpers (where emit writes, which view is running).
type vmState struct {
	prog     *Program
	pool     *Pool
	vm       *goja.Runtime
	maps     []goja.Callable // per view
	reduces  []goja.Callable // per view; nil unless a JavaScript reduce
	dec      *jsonDecoder
	enc      *jsonEncoder
	makeMeta goja.Callable // builds meta from its fields
	driver   goja.Callable // calls its argument: the outer call of a batch
	typeJSON goja.Value    // "json", cached
	broken   bool          // a Go panic went through the runtime; do not reuse

	// State of the call in progress.
	view      string     // view whose function runs, for log
	docID     string     // document being mapped, for log
	out       *emitArena // where emit writes; nil outside map calls
	emitBytes int        // bytes emitted by the current map call
	emitCount int        // rows emitted by the current map call (counted past MaxEmitsPerDoc)
	abortErr  error      // why a helper aborted the call
	redOut    []byte     // the encoded result of a reduce call
	logCalls  int        // log(...) calls made by the current call
	logSkip   int        // log(...) calls a run again leaves out: its interrupted run wrote them (see worker.callRetrying)
}

// newVMState creates a runtime for pr: helpers first, then every map and
// JavaScript reduce function instantiated from the shared compiled programs.
func newVMState(p *Pool, pr *Program) (*vmState, error) {
	vm := goja.New()
	fr, err := newFreezer(vm)
	if err != nil {
		return nil, err
	}
	vm.SetMaxCallStackSize(p.opts.MaxCallStackSize)
	// No source maps: the parser would otherwise read files named by a
	// sourceMappingURL comment in code given to eval or new Function.
	vm.SetParserOptions(parser.WithDisableSourceMaps)
	rt := &vmState{
		prog: pr,
		pool: p,
		vm:   vm,
		dec:  newJSONDecoder(vm),
		enc:  newJSONEncoder(vm),

		typeJSON: vm.ToValue(TypeJSON),
	}
	for name, fn := range map[string]func(goja.FunctionCall) goja.Value{
		"emit":         rt.emit,
		"decodeBase64": rt.decodeBase64,
		"log":          rt.log,
	} {
		if err := vm.Set(name, fn); err != nil {
			return nil, fmt.Errorf("jsruntime: installing %s: %w", name, err)
		}
	}
	hv, err := vm.RunProgram(p.helpers)
	if err != nil {
		return nil, fmt.Errorf("jsruntime: installing helpers: %w", err)
	}
	ho := hv.ToObject(vm)
	if err := vm.Set("sum", ho.Get("0")); err != nil {
		return nil, err
	}
	if err := vm.Set("dateToArray", ho.Get("1")); err != nil {
		return nil, err
	}
	rt.makeMeta, _ = goja.AssertFunction(ho.Get("2"))
	rt.driver, _ = goja.AssertFunction(ho.Get("3"))
	wv, err := vm.RunProgram(p.wrapRed)
	if err != nil {
		return nil, fmt.Errorf("jsruntime: installing reduce wrapper: %w", err)
	}
	wrap, _ := goja.AssertFunction(wv)
	output := vm.ToValue(rt.reduceOutput)

	rt.maps = make([]goja.Callable, len(pr.views))
	rt.reduces = make([]goja.Callable, len(pr.views))
	fns := []any{ho, wv, output}
	for i, cv := range pr.views {
		v, err := vm.RunProgram(cv.mapProg)
		if err != nil {
			return nil, fmt.Errorf("jsruntime: view %s: instantiating map: %w", cv.name, err)
		}
		fn, ok := goja.AssertFunction(v)
		if !ok {
			return nil, &CompileError{View: cv.name, Func: funcMap, Msg: "the map source is not a function expression", Err: ErrNotFunction}
		}
		rt.maps[i] = fn
		fns = append(fns, v)
		if cv.reduceKind != reduceJS {
			continue
		}
		v, err = vm.RunProgram(cv.reduceProg)
		if err != nil {
			return nil, fmt.Errorf("jsruntime: view %s: instantiating reduce: %w", cv.name, err)
		}
		fns = append(fns, v)
		if _, ok := goja.AssertFunction(v); !ok {
			return nil, &CompileError{View: cv.name, Func: funcReduce, Msg: "the reduce source is not a function expression", Err: ErrNotFunction}
		}
		wrapped, err := wrap(goja.Undefined(), v, output)
		if err != nil {
			return nil, fmt.Errorf("jsruntime: view %s: wrapping reduce: %w", cv.name, err)
		}
		rt.reduces[i], _ = goja.AssertFunction(wrapped)
		fns = append(fns, wrapped)
	}
	// Freeze everything the functions can reach, so that no call leaves
	// state behind for the next (see tameSource).
	tv, err := vm.RunProgram(p.tame)
	if err != nil {
		return nil, fmt.Errorf("jsruntime: installing freeze: %w", err)
	}
	tame, _ := goja.AssertFunction(tv)
	roots, err := tame(goja.Undefined(), vm.NewArray(fns...))
	if err != nil {
		return nil, fmt.Errorf("jsruntime: freezing the global environment: %w", err)
	}
	if err := fr.freezeFrom(roots); err != nil {
		return nil, fmt.Errorf("jsruntime: freezing the global environment: %w", err)
	}
	return rt, nil
}

// emit is the native emit(key, value): both are encoded to JSON at once and
// written to the current arena. An encoding error (a function, a cycle, a
// BigInt) throws a TypeError; going over MaxKeySize or MaxEmitSize aborts
// the call; rows past MaxEmitsPerDoc are only counted (mapDoc fails the
// view for the document once the call returns).
func (rt *vmState) emit(call goja.FunctionCall) goja.Value {
	a := rt.out
	if a == nil {
		panic(rt.vm.NewTypeError("emit() may only be called by a map function"))
	}
	// Over MaxEmitsPerDoc the call goes on, only counting, so that the
	// error can say how many keys it emitted, as Couchbase's does.
	rt.emitCount++
	if rt.emitCount > MaxEmitsPerDoc {
		return goja.Undefined()
	}
	a.reserve()
	ks := len(a.buf)
	a.buf = rt.enc.appendTop(a.buf, call.Argument(0), "key")
	ke := len(a.buf)
	a.buf = rt.enc.appendTop(a.buf, call.Argument(1), "value")
	ve := len(a.buf)
	if n := ke - ks; n >= MaxKeySize {
		rt.abort(fmt.Errorf("%w: %d bytes", ErrKeyTooLong, n))
		return goja.Undefined()
	}
	rt.emitBytes += ve - ks
	if rt.emitBytes > MaxEmitSize {
		rt.abort(fmt.Errorf("%w: more than %d bytes", ErrEmitTooLarge, MaxEmitSize))
		return goja.Undefined()
	}
	a.add(Emit{Key: a.buf[ks:ke:ke], Value: a.buf[ke:ve:ve]})
	return goja.Undefined()
}

// abort stops the running call for good: the interrupt cannot be caught by
// the script, and worker.call reports err.
func (rt *vmState) abort(err error) {
	if rt.abortErr == nil {
		rt.abortErr = err
	}
	rt.vm.Interrupt(errAbort)
}

// reduceOutput receives a reduce function's result, inside the call.
func (rt *vmState) reduceOutput(call goja.FunctionCall) goja.Value {
	rt.redOut = rt.enc.appendTop(rt.redOut[:0], call.Argument(0), "reduction")
	return goja.Undefined()
}

// decodeBase64 is Couchbase's decodeBase64(string): it returns the decoded
// bytes as an array of numbers 0-255 (String.fromCharCode.apply(null, a)
// makes a string of them). Like Couchbase it throws the string "Input is
// not a string" or "Invalid base64 source.".
func (rt *vmState) decodeBase64(call goja.FunctionCall) goja.Value {
	s, ok := call.Argument(0).(goja.String)
	if !ok {
		panic(rt.vm.ToValue("Input is not a string"))
	}
	b, err := base64.StdEncoding.DecodeString(s.String())
	if err != nil {
		panic(rt.vm.ToValue("Invalid base64 source."))
	}
	items := make([]any, len(b))
	for i, c := range b {
		items[i] = int64(c)
	}
	return rt.vm.NewArray(items...)
}

// log writes its arguments, separated by spaces, to Options.Logger at level
// Info: strings as they are, other values as JSON (or their string form
// when they have none).
//
// Lines are limited per design document (LogRate, LogBurst: more are
// dropped and counted) and cut at MaxLogLine bytes.
func (rt *vmState) log(call goja.FunctionCall) goja.Value {
	rt.logCalls++
	if rt.logCalls <= rt.logSkip {
		return goja.Undefined() // written by the interrupted run this one repeats
	}
	if ok, _ := rt.prog.logLimit.Allow(); !ok {
		rt.prog.logDropped.Add(1)
		return goja.Undefined()
	}
	var sb strings.Builder
	var buf []byte
	for i, arg := range call.Arguments {
		if sb.Len() > MaxLogLine {
			break
		}
		if i > 0 {
			sb.WriteByte(' ')
		}
		if s, ok := arg.(goja.String); ok {
			if s.Length() > MaxLogLine {
				s = s.Substring(0, MaxLogLine+1) // the rest would be cut anyway
			}
			sb.WriteString(s.String())
			continue
		}
		if ex := rt.vm.Try(func() { buf = rt.enc.appendTop(buf[:0], arg, "value") }); ex != nil {
			sb.WriteString(arg.String())
			continue
		}
		sb.Write(buf)
	}
	msg := sb.String()
	if len(msg) > MaxLogLine {
		cut := MaxLogLine
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "…(truncated)"
	}
	rt.pool.opts.Logger.Info("jsruntime: log", "view", rt.view, "doc", rt.docID, "msg", msg)
	return goja.Undefined()
}

// newMeta builds the meta argument of a map function: {id, rev, seq, vb,
// expiration, flags, type, ts, created}, with seq and vb as strings, as Couchbase does.
func (rt *vmState) newMeta(m *Meta) (goja.Value, error) {
	vm := rt.vm
	typ := rt.typeJSON
	if m.Type != "" && m.Type != TypeJSON {
		typ = vm.ToValue(m.Type)
	}
	return rt.makeMeta(goja.Undefined(),
		vm.ToValue(m.ID),
		vm.ToValue(m.Rev),
		vm.ToValue(strconv.FormatUint(m.Seq, 10)),
		vm.ToValue(strconv.FormatUint(uint64(m.VB), 10)),
		vm.ToValue(m.Expiration),
		vm.ToValue(m.Flags),
		typ,
		vm.ToValue(m.TS),
		vm.ToValue(m.Created),
	)
}

// batch runs f inside one outer JavaScript call, so that the calls f makes
// through w.call are nested ones: goja then keeps its value stack from one
// call to the next instead of freeing it after each top-level call (about a
// fifth faster on small documents). When f returns, the outer call returns,
// and goja runs the promise jobs the functions queued (async functions,
// then callbacks); that tail is under the time limit too, outside any view,
// so the jobs cannot emit. A Go panic in f is recovered, marks rt broken and
// is returned.
func (rt *vmState) batch(ctx context.Context, w *worker, f func()) (err error) {
	armed := false
	native := func(goja.FunctionCall) goja.Value {
		func() {
			defer func() {
				if x := recover(); x != nil {
					rt.broken = true
					err = fmt.Errorf("jsruntime: internal error: %v", x)
				}
			}()
			f()
		}()
		_ = w.begin(ctx, rt, true)
		armed = true
		return goja.Undefined()
	}
	defer func() {
		if armed {
			w.end(rt)
		}
		if x := recover(); x != nil {
			rt.broken = true
			err = fmt.Errorf("jsruntime: internal error: %v", x)
		}
	}()
	// Errors of the promise jobs are nobody's: ignored.
	_, _ = rt.driver(goja.Undefined(), rt.vm.ToValue(native))
	return err
}
