package main

import (
	"fmt"
	"net/http"
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

// The water marks are cbepctl flush_params too: set in bytes or as a
// fraction of the quota, checked, shown by stats, and moved in proportion
// by a change of the quota.
func TestCtlWaterMarks(t *testing.T) {
	f := cliServer(t)
	const quota = 100 << 20 // the fixture's buckets' default
	// A high mark under the default low one (75%) is refused until the
	// low one is lowered first.
	if r := f.mf("", "ctl", "set", "flush_param", "mem_high_wat_percent", "0.5", "-b", "travel"); r.code == 0 || !strings.Contains(r.errOut, "mem_low_wat: must be below mem_high_wat") {
		t.Errorf("ctl set mem_high_wat_percent 0.5 under the default low mark: %v", r)
	}
	if r := f.mf("", "ctl", "set", "flush_param", "mem_low_wat", fmt.Sprint(quota*4/10), "-b", "travel"); r.code != 0 {
		t.Fatalf("ctl set mem_low_wat: %v", r)
	}
	if r := f.mf("", "ctl", "set", "flush_param", "mem_high_wat_percent", "0.5", "-b", "travel"); r.code != 0 || !strings.Contains(r.out, "set mem_high_wat_percent to 0.5\n") {
		t.Fatalf("ctl set mem_high_wat_percent 0.5: %v", r)
	}
	if r := f.mf("", "ctl", "get", "flush_param", "mem_high_wat", "-b", "travel"); r.code != 0 || r.out != fmt.Sprintf("mem_high_wat %d\n", quota/2) {
		t.Fatalf("ctl get mem_high_wat: %v, want %d", r, quota/2)
	}
	// Low at or above high, or past the quota: refused, nothing changed.
	if r := f.mf("", "ctl", "set", "flush_param", "mem_low_wat_percent", "0.6", "-b", "travel"); r.code == 0 || !strings.Contains(r.errOut, "mem_low_wat") {
		t.Errorf("ctl set mem_low_wat_percent 0.6 above a high mark of 0.5: %v", r)
	}
	if r := f.mf("", "ctl", "set", "flush_param", "mem_high_wat", fmt.Sprint(quota+1), "-b", "travel"); r.code == 0 || !strings.Contains(r.errOut, "mem_high_wat") {
		t.Errorf("ctl set mem_high_wat past the quota: %v", r)
	}
	// A share so small it is 0 bytes is refused, not taken as 0, the default.
	if r := f.mf("", "ctl", "set", "flush_param", "mem_low_wat_percent", "0.000000001", "-b", "travel"); r.code == 0 || !strings.Contains(r.errOut, "is 0 bytes") {
		t.Errorf("ctl set mem_low_wat_percent 0.000000001: %v", r)
	}
	if r := f.mf("", "stats", "ep_mem_high_wat", "ep_mem_low_wat", "-b", "travel"); r.code != 0 || !strings.Contains(r.out, fmt.Sprint(quota/2)) || !strings.Contains(r.out, fmt.Sprint(quota*4/10)) {
		t.Errorf("stats after the change: %v", r)
	}
	// Doubling the quota keeps the marks' share of it.
	req, _ := http.NewRequest("POST", f.url+"/pools/default/buckets/travel", strings.NewReader("ramQuota=200"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(adminUser, adminPass)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("ramQuota=200: %s", resp.Status)
	}
	if r := f.mf("", "ctl", "get", "flush_param", "mem_low_wat_percent", "-b", "travel"); r.code != 0 || r.out != "mem_low_wat_percent 0.4\n" {
		t.Errorf("after the quota doubled: %v, want 0.4", r)
	}
	if r := f.mf("", "ctl", "get", "flush_param", "mem_high_wat", "-b", "travel"); r.code != 0 || r.out != fmt.Sprintf("mem_high_wat %d\n", quota) {
		t.Errorf("after the quota doubled: %v, want %d", r, quota)
	}
}
