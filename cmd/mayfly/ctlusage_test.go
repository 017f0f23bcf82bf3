package main

import (
	"strings"
	"testing"
)

// A flush_param name ctl does not know, or a value that is not a number, is
// a mistake in the command line, found before any request: exit 2 and
// nothing sent (the README: "mistakes in the command line exit 2"); a
// review found both exited 1, as a server's refusal does.
func TestCtlCommandLineMistakesExitTwo(t *testing.T) {
	f := cliServer(t)
	for _, args := range [][]string{
		{"ctl", "set", "flush_param", "nonsense", "3"},
		{"ctl", "get", "flush_param", "nonsense"},
		{"ctl", "set", "flush_param", "exp_pager_stime", "abc"},
		{"ctl", "set", "flush_param", "mem_high_wat_percent", "eighty"},
	} {
		r := f.mf("", args...)
		if r.code != 2 || !strings.Contains(r.errOut, args[3]) || strings.Contains(r.out, "setting param") {
			t.Errorf("%v: %v, want exit 2 naming %s, nothing set", args, r, args[3])
		}
	}
	if got := f.def.Settings().ExpPagerStime; got != 3600 {
		t.Errorf("exp_pager_stime after refused ctl commands: %d, want 3600", got)
	}
}
