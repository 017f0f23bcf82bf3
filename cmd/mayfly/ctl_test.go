package main

import (
	"strings"
	"testing"
)

// A negative number is an argument, not a flag.
func TestCtlNegativeValue(t *testing.T) {
	f := cliServer(t)
	if r := f.mf("", "ctl", "set", "flush_param", "exp_pager_initial_run_time", "-1", "-b", "travel"); r.code != 0 || !strings.Contains(r.out, "set exp_pager_initial_run_time to -1") {
		t.Fatalf("ctl set ... -1: %v", r)
	}
	if r := f.mf("", "ctl", "get", "flush_param", "exp_pager_initial_run_time", "-b", "travel"); r.code != 0 || r.out != "exp_pager_initial_run_time -1\n" {
		t.Fatalf("ctl get: %v", r)
	}
}

// A large value prints as the integer it is, for a script to read back:
// 1000000 seconds is not "1e+06" (the answer's numbers were decoded as
// float64 and printed with %v).
func TestCtlPrintsWholeNumbers(t *testing.T) {
	f := cliServer(t)
	if r := f.mf("", "ctl", "set", "flush_param", "exp_pager_stime", "1000000", "-b", "travel"); r.code != 0 || !strings.Contains(r.out, "set exp_pager_stime to 1000000\n") {
		t.Fatalf("ctl set ... 1000000: %v", r)
	}
	if r := f.mf("", "ctl", "get", "flush_param", "exp_pager_stime", "-b", "travel"); r.code != 0 || r.out != "exp_pager_stime 1000000\n" {
		t.Fatalf("ctl get: %v", r)
	}
}
