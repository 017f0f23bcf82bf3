package main

import (
	"bytes"
	"context"
	"io"
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
