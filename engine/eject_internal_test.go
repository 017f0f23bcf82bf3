package engine

import (
	"reflect"
	"testing"
)

// An ejected copy keeps every exported field of its version but the value,
// and a copy with the value read back is the version again: a field added
// to Document and forgotten in copyMeta fails here.
func TestEjectedCopyKeepsEveryField(t *testing.T) {
	d := &Document{}
	v := reflect.ValueOf(d).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		if !v.Type().Field(i).IsExported() {
			continue
		}
		switch f.Kind() {
		case reflect.String:
			f.SetString("s" + v.Type().Field(i).Name)
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Uint16, reflect.Uint32, reflect.Uint64:
			f.SetUint(uint64(i + 1))
		case reflect.Int64:
			f.SetInt(int64(i + 1))
		case reflect.Slice:
			f.SetBytes([]byte("value"))
		default:
			t.Fatalf("field %s of kind %s: teach this test to set it", v.Type().Field(i).Name, f.Kind())
		}
	}
	e := d.withoutValue()
	if !e.ejected || e.Value != nil || e.valueSize() != int64(len(d.Value)) {
		t.Fatalf("ejected copy: ejected %v, value %q, size %d", e.ejected, e.Value, e.valueSize())
	}
	r := e.withValue(d.Value)
	ev := reflect.ValueOf(r).Elem()
	for i := range v.NumField() {
		if !v.Type().Field(i).IsExported() {
			continue
		}
		if !reflect.DeepEqual(v.Field(i).Interface(), ev.Field(i).Interface()) {
			t.Errorf("field %s: %v after ejection and read-back, want %v", v.Type().Field(i).Name, ev.Field(i).Interface(), v.Field(i).Interface())
		}
	}
	if r.ejected || r.valueSize() != int64(len(d.Value)) {
		t.Errorf("read-back copy: ejected %v, size %d", r.ejected, r.valueSize())
	}
}
