package jsruntime

import (
	"fmt"
	"strconv"

	"github.com/dop251/goja"
)

// freezer freezes everything reachable from a set of roots in one runtime
// (see tameSource for the roots): it walks the objects in Go, through the
// runtime's own Object.getOwnPropertyDescriptor, getOwnPropertySymbols,
// isFrozen and freeze, taken before any script ran. The same walk in
// JavaScript made a runtime's creation cost twice the CPU (the
// interpreter's loop around each step), four times under the race detector
// (BENCHMARKS.md, "make test: the fixtures' share").
type freezer struct {
	vm       *goja.Runtime
	object   *goja.Object // the Object constructor, the this of the calls
	getDesc  goja.Callable
	getSyms  goja.Callable // (goja's Object.Symbols lists enumerable ones only)
	isFrozen goja.Callable
	freeze   goja.Callable
}

// newFreezer takes the functions a freezer calls from vm's Object
// constructor; call it before any script runs in vm.
func newFreezer(vm *goja.Runtime) (*freezer, error) {
	obj, ok := vm.Get("Object").(*goja.Object)
	if !ok {
		return nil, fmt.Errorf("jsruntime: no Object constructor")
	}
	f := &freezer{vm: vm, object: obj}
	for name, dst := range map[string]*goja.Callable{
		"getOwnPropertyDescriptor": &f.getDesc,
		"getOwnPropertySymbols":    &f.getSyms,
		"isFrozen":                 &f.isFrozen,
		"freeze":                   &f.freeze,
	} {
		fn, ok := goja.AssertFunction(obj.Get(name))
		if !ok {
			return nil, fmt.Errorf("jsruntime: no Object.%s", name)
		}
		*dst = fn
	}
	return f, nil
}

// freezeFrom freezes every object and function reachable from the items of
// the array roots: each item, its prototype, the values, getters and
// setters of its own properties (names and symbols), recursively. An
// object already frozen is left as it is (its properties are still
// walked).
func (f *freezer) freezeFrom(roots goja.Value) error {
	ro, ok := roots.(*goja.Object)
	if !ok {
		return fmt.Errorf("jsruntime: freeze roots are not an array")
	}
	seen := make(map[*goja.Object]struct{}, 512)
	var todo []*goja.Object
	add := func(v goja.Value) {
		if o, ok := v.(*goja.Object); ok && o != nil {
			if _, ok := seen[o]; !ok {
				seen[o] = struct{}{}
				todo = append(todo, o)
			}
		}
	}
	n := ro.Get("length").ToInteger()
	for i := int64(0); i < n; i++ {
		add(ro.Get(strconv.FormatInt(i, 10)))
	}
	look := func(o *goja.Object, key goja.Value) error {
		d, err := f.getDesc(f.object, o, key)
		if err != nil {
			return err
		}
		if do, ok := d.(*goja.Object); ok {
			add(do.Get("value"))
			add(do.Get("get"))
			add(do.Get("set"))
		}
		return nil
	}
	for len(todo) > 0 {
		o := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if p := o.Prototype(); p != nil {
			add(p)
		}
		for _, name := range o.GetOwnPropertyNames() {
			if err := look(o, f.vm.ToValue(name)); err != nil {
				return err
			}
		}
		syms, err := f.getSyms(f.object, o)
		if err != nil {
			return err
		}
		so, ok := syms.(*goja.Object)
		if !ok {
			return fmt.Errorf("jsruntime: Object.getOwnPropertySymbols returned %v", syms)
		}
		for i, n := int64(0), so.Get("length").ToInteger(); i < n; i++ {
			if err := look(o, so.Get(strconv.FormatInt(i, 10))); err != nil {
				return err
			}
		}
		frozen, err := f.isFrozen(f.object, o)
		if err != nil {
			return err
		}
		if !frozen.ToBoolean() {
			if _, err := f.freeze(f.object, o); err != nil {
				return err
			}
		}
	}
	return nil
}
