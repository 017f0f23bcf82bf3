package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
)

// The example: flags after the positional arguments are flags.
func TestStatsFlagsAnywhere(t *testing.T) {
	f := cliServer(t)
	ctx := context.Background()
	travel, err := f.eng.Bucket("travel")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b"} {
		travel.DefaultCollection().Upsert(ctx, k, []byte(`{}`), nil)
	}
	f.def.DefaultCollection().Upsert(ctx, "x", []byte(`{}`), nil)
	for _, args := range [][]string{
		{"stats", "curr_items", "-b", "travel"},
		{"stats", "-b", "travel", "curr_items"},
		{"stats", "--bucket=travel", "curr_items"},
	} {
		if r := f.mf("", args...); r.code != 0 || r.out != " curr_items: 2\n" {
			t.Errorf("%v: %v", args, r)
		}
	}
	if r := f.mf("", "stats", "curr_items"); r.code != 0 || r.out != " curr_items: 1\n" {
		t.Errorf("stats of default: %v", r)
	}
	// Long flags with one dash, as the Go flag package took them.
	var out bytes.Buffer
	if code := run([]string{"stats", "-host", f.url, "-u", adminU, "-bucket", "travel", "curr_items"}, &out, io.Discard); code != 0 || out.String() != " curr_items: 2\n" {
		t.Errorf("-host and -bucket: %d %q", code, out.String())
	}
}

// The warm-up's words are statistics too (cbstats warmup), the warmup
// group prints alone, and an unknown name does not hide the others: it is
// named after them, with a non-zero exit.
func TestStatsWarmupAndUnknownNames(t *testing.T) {
	f := cliServer(t)
	r := f.mf("", "stats", "ep_warmup_state", "curr_items", "ep_warmup_thread", "-b", "travel")
	if r.code != 0 || r.out != " ep_warmup_state:  done\n curr_items:       0\n ep_warmup_thread: complete\n" {
		t.Errorf("stats ep_warmup_state curr_items ep_warmup_thread: %v", r)
	}
	r = f.mf("", "stats", "nope", "curr_items", "ep_warmup_state", "nada", "-b", "travel")
	if r.code == 0 || r.out != " curr_items:      0\n ep_warmup_state: done\n" || !strings.Contains(r.errOut, `no statistics named "nope", "nada"`) {
		t.Errorf("stats with two unknown names: %v", r)
	}
	r = f.mf("", "stats", "warmup", "-b", "travel")
	for _, want := range []string{" ep_warmup:", " ep_warmup_thread:", "complete\n", " ep_warmup_state:", " ep_warmup_key_count:", " ep_warmup_estimated_value_count:"} {
		if r.code != 0 || !strings.Contains(r.out, want) {
			t.Errorf("stats warmup: %v, want %q in it", r, want)
		}
	}
	r = f.mf("", "stats", "-b", "travel")
	if r.code != 0 || !strings.Contains(r.out, " ep_warmup_state:") || !strings.Contains(r.out, " curr_items:") {
		t.Errorf("stats (all): %v", r)
	}
}
