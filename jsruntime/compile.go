package jsruntime

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dop251/goja"
	"github.com/dop251/goja/ast"
	"github.com/dop251/goja/parser"
)

// ViewSource is one view of a design document as stored: its name, its map
// function and its optional reduce.
type ViewSource struct {
	// Name is the view's name, used in errors and by Program.Reducer.
	Name string
	// Map is the JavaScript source of function (doc, meta) { ... }.
	Map string
	// Reduce is "" (no reduce), one of the built-ins "_count", "_sum" and
	// "_stats", or the JavaScript source of function (keys, values,
	// rereduce) { ... }. Surrounding white space is ignored.
	Reduce string
}

// Names of the functions of a view, in errors.
const (
	funcMap    = "map"
	funcReduce = "reduce"
)

// reduceKind is how a view reduces.
type reduceKind uint8

const (
	reduceNone reduceKind = iota
	reduceCount
	reduceSum
	reduceStats
	reduceJS
)

// compiledView is one view after compilation; shared, read-only.
type compiledView struct {
	name       string
	mapProg    *goja.Program
	usesDoc    bool // the map function may read its first argument
	usesMeta   bool // the map function may read its second argument
	reduceKind reduceKind
	reduceProg *goja.Program // for reduceJS
	reduceKeys bool          // the JavaScript reduce may read its keys argument
}

// Compile checks every function of a design document without running it,
// and returns nil when they all compile. A syntax error is a *CompileError
// naming the view, the function ("map" or "reduce"), the line and the
// message; so is a source that is not a single function expression (wrapping
// ErrNotFunction) and a reduce naming an unknown built-in such as "_median"
// (wrapping ErrUnknownBuiltin). Only the first error is returned.
func Compile(views []ViewSource) error {
	_, err := compileViews(views)
	return err
}

// MaxSourceSize is the most bytes of source a map or reduce function may
// have: a longer one is a *CompileError wrapping ErrSourceTooLarge.
// (Parsing and compiling take about 0.75 s and a hundred and fifty MB per
// MiB of source.)
const MaxSourceSize = 1 << 20

// MaxTotalSourceSize is the most bytes of source all the functions of a
// design document may have together: more is a *CompileError wrapping
// ErrSourceTooLarge (for the view where the total passes it).
const MaxTotalSourceSize = 4 << 20

// MaxCompileTime bounds the compilation of a design document's functions:
// one that takes longer fails with a *CompileError wrapping
// ErrCompileTimeout. The parser cannot be interrupted, so the compilation
// goes on in the background until it ends (within about a second per
// function, given MaxSourceSize), and its result is dropped.
var MaxCompileTime = 5 * time.Second

func compileViews(views []ViewSource) ([]compiledView, error) {
	total := 0
	for _, v := range views {
		for _, f := range []struct{ which, src string }{{funcMap, v.Map}, {funcReduce, v.Reduce}} {
			if len(f.src) > MaxSourceSize {
				return nil, &CompileError{View: v.Name, Func: f.which,
					Msg: fmt.Sprintf("the %s function is %d bytes long, more than the limit of %d", f.which, len(f.src), MaxSourceSize),
					Err: ErrSourceTooLarge}
			}
			if total += len(f.src); total > MaxTotalSourceSize {
				return nil, &CompileError{View: v.Name, Func: f.which,
					Msg: fmt.Sprintf("the design document's functions are more than the limit of %d bytes long together", MaxTotalSourceSize),
					Err: ErrSourceTooLarge}
			}
		}
	}
	type result struct {
		cvs []compiledView
		err error
	}
	done := make(chan result, 1)
	go func() {
		cvs, err := compileViewsNow(views)
		done <- result{cvs, err}
	}()
	timer := time.NewTimer(MaxCompileTime)
	defer timer.Stop()
	select {
	case r := <-done:
		return r.cvs, r.err
	case <-timer.C:
		name := ""
		if len(views) > 0 {
			name = views[0].Name
		}
		return nil, &CompileError{View: name, Func: funcMap,
			Msg: fmt.Sprintf("compiling the design document took longer than %v", MaxCompileTime),
			Err: ErrCompileTimeout}
	}
}

func compileViewsNow(views []ViewSource) ([]compiledView, error) {
	out := make([]compiledView, len(views))
	seen := make(map[string]bool, len(views))
	for i, v := range views {
		if seen[v.Name] {
			return nil, &CompileError{View: v.Name, Func: funcMap, Msg: fmt.Sprintf("duplicate view name %q", v.Name)}
		}
		seen[v.Name] = true
		cv := compiledView{name: v.Name}
		fn, err := compileFunction(v.Name, funcMap, v.Map)
		if err != nil {
			return nil, err
		}
		cv.mapProg = fn.prog
		cv.usesDoc = fn.usesParam(0)
		cv.usesMeta = fn.usesParam(1)
		red := strings.TrimSpace(v.Reduce)
		switch {
		case red == "":
			cv.reduceKind = reduceNone
		case red == "_count":
			cv.reduceKind = reduceCount
		case red == "_sum":
			cv.reduceKind = reduceSum
		case red == "_stats":
			cv.reduceKind = reduceStats
		case strings.HasPrefix(red, "_"):
			return nil, &CompileError{
				View: v.Name, Func: funcReduce,
				Msg: "invalid built-in reduce function: " + red,
				Err: ErrUnknownBuiltin,
			}
		default:
			rf, err := compileFunction(v.Name, funcReduce, v.Reduce)
			if err != nil {
				return nil, err
			}
			cv.reduceKind = reduceJS
			cv.reduceProg = rf.prog
			cv.reduceKeys = rf.usesParam(0)
		}
		out[i] = cv
	}
	return out, nil
}

// compiledFunc is a function expression compiled into a program whose
// completion value is the function, plus what a static look at its source
// tells about the use of its parameters.
type compiledFunc struct {
	prog   *goja.Program
	params []string // simple parameter names; nil when unknown
	all    bool     // every parameter must be treated as used
	body   string   // source text after the parameter list
}

// usesParam reports whether the function may observe its i-th argument. It
// errs on the side of "yes": any occurrence of the parameter's name as a
// whole word after the parameter list counts (in strings and comments too),
// and so do "arguments", "eval" and any \u escape (which could spell an
// identifier). A parameter the function does not declare is used only
// through arguments or eval.
func (f *compiledFunc) usesParam(i int) bool {
	if f.all || containsWord(f.body, "arguments") || containsWord(f.body, "eval") ||
		strings.Contains(f.body, `\u`) {
		return true
	}
	if i >= len(f.params) {
		return false
	}
	return containsWord(f.body, f.params[i])
}

// containsWord reports whether s holds w not preceded or followed by an
// ASCII identifier character. Non-ASCII bytes count as separators, so an
// exotic identifier can only cause a false "yes".
func containsWord(s, w string) bool {
	for off := 0; ; {
		i := strings.Index(s[off:], w)
		if i < 0 {
			return false
		}
		i += off
		end := i + len(w)
		if (i == 0 || !isIdentByte(s[i-1])) && (end == len(s) || !isIdentByte(s[end])) {
			return true
		}
		off = i + 1
	}
}

func isIdentByte(c byte) bool {
	return c == '_' || c == '$' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

// compileFunction parses src, which must be one function expression (a
// function literal or an arrow function, neither async nor a generator),
// and compiles it. The source is wrapped in parentheses on the same line,
// so line numbers in errors are those of src.
func compileFunction(view, which, src string) (*compiledFunc, error) {
	if strings.TrimSpace(src) == "" {
		return nil, &CompileError{View: view, Func: which, Msg: "the " + which + " function is empty", Err: ErrNotFunction}
	}
	wrapped := "(" + src + "\n)"
	prg, err := parser.ParseFile(nil, "", wrapped, 0, parser.WithDisableSourceMaps)
	if err != nil {
		ce := &CompileError{View: view, Func: which, Msg: "SyntaxError: " + err.Error()}
		var list parser.ErrorList
		if errors.As(err, &list) && len(list) > 0 {
			ce.Msg = "SyntaxError: " + list[0].Message
			ce.Line = list[0].Position.Line
			// An error on the wrapper's closing line means src ended early.
			if lines := strings.Count(src, "\n") + 1; ce.Line > lines {
				ce.Msg, ce.Line = "SyntaxError: Unexpected end of input", lines
			}
		}
		return nil, ce
	}
	notFunc := &CompileError{
		View: view, Func: which, Line: 1,
		Msg: "the " + which + " source is not a function expression", Err: ErrNotFunction,
	}
	if len(prg.Body) != 1 {
		return nil, notFunc
	}
	stmt, ok := prg.Body[0].(*ast.ExpressionStatement)
	if !ok {
		return nil, notFunc
	}
	cf := &compiledFunc{}
	var plist *ast.ParameterList
	var body ast.Node
	switch fn := stmt.Expression.(type) {
	case *ast.FunctionLiteral:
		if fn.Async || fn.Generator {
			return nil, notFunc
		}
		plist, body = fn.ParameterList, fn.Body
	case *ast.ArrowFunctionLiteral:
		if fn.Async {
			return nil, notFunc
		}
		plist, body = fn.ParameterList, fn.Body
	default:
		return nil, notFunc
	}
	if plist != nil {
		if plist.Rest != nil {
			cf.all = true
		}
		for _, b := range plist.List {
			id, ok := b.Target.(*ast.Identifier)
			if !ok || b.Initializer != nil {
				cf.all = true
				break
			}
			cf.params = append(cf.params, id.Name.String())
		}
	}
	start, end := int(body.Idx0())-1, int(body.Idx1())-1
	if start < 0 || end > len(wrapped) || start > end {
		cf.all = true
	} else {
		cf.body = wrapped[start:end]
	}
	prog, err := goja.CompileAST(prg, false)
	if err != nil {
		ce := &CompileError{View: view, Func: which, Msg: err.Error()}
		var cse *goja.CompilerSyntaxError
		if errors.As(err, &cse) {
			ce.Msg = "SyntaxError: " + cse.Message
			if cse.File != nil {
				ce.Line = cse.File.Position(cse.Offset).Line
			}
		}
		return nil, ce
	}
	cf.prog = prog
	return cf, nil
}
