package jsruntime_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/jsruntime"
)

func TestOptions_Defaults(t *testing.T) {
	o := (*jsruntime.Options)(nil).EnsureDefaults()
	if o.Workers != runtime.NumCPU() || o.Timeout != 5*time.Second || o.MaxCallStackSize != jsruntime.DefaultMaxCallStackSize ||
		o.CachedPrograms != jsruntime.DefaultCachedPrograms || o.Logger == nil {
		t.Errorf("defaults: %+v", o)
	}
	set := &jsruntime.Options{Workers: 3, Timeout: time.Second}
	set.EnsureDefaults()
	if set.Workers != 3 || set.Timeout != time.Second {
		t.Errorf("EnsureDefaults overwrote set fields: %+v", set)
	}
	if err := (&jsruntime.Options{}).Validate(); err != nil {
		t.Errorf("zero options: %v", err)
	}
	for _, bad := range []jsruntime.Options{{Workers: -1}, {Timeout: -time.Second}, {MaxCallStackSize: -1}, {CachedPrograms: -1}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v validated", bad)
		}
	}
}

func TestNewPool_KeepsItsOwnOptions(t *testing.T) {
	opts := &jsruntime.Options{Workers: 1}
	p := newPool(t, opts)
	if opts.Timeout != 0 || opts.Logger != nil {
		t.Errorf("NewPool changed the caller's options: %+v", opts)
	}
	pr := load(t, p, jsruntime.ViewSource{Name: "v", Map: "function (doc) { emit(doc.a); }"})
	if _, err := pr.Map(context.Background(), []jsruntime.Doc{jsonDoc("a", `{"a":1}`)}); err != nil {
		t.Error(err)
	}
}
