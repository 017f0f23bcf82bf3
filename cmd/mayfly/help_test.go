package main

import (
	"strings"
	"testing"
)

func TestCompletion(t *testing.T) {
	r := runCmdResult("completion", "bash")
	if r.code != 0 || !strings.Contains(r.out, "__start_mayfly") {
		t.Fatalf("completion bash: %v", r)
	}
	for _, shell := range []string{"zsh", "fish", "powershell"} {
		if r := runCmdResult("completion", shell); r.code != 0 || r.out == "" {
			t.Errorf("completion %s: %v", shell, r)
		}
	}
	// What the shell asks while completing: commands, sub-commands, flag
	// values, flags.
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"__complete", "q"}, []string{"query"}},
		{[]string{"__complete", "ddoc", ""}, []string{"put", "get", "rm", "ls"}},
		{[]string{"__complete", "ctl", ""}, []string{"set", "get"}},
		{[]string{"__complete", "load", "--format", ""}, []string{"ndjson", "json", "csv", "bulk"}},
		{[]string{"__complete", "query", "--st"}, []string{"--stale", "--startkey"}},
	} {
		r := runCmdResult(c.args...)
		for _, w := range c.want {
			if r.code != 0 || !strings.Contains(r.out, w+"\n") && !strings.Contains(r.out, w+"\t") {
				t.Errorf("%v: %v lacks %q", c.args, r, w)
			}
		}
	}
}

func TestHelpListsCommands(t *testing.T) {
	r := runCmdResult("--help")
	for _, c := range []string{"serve", "load", "export", "get", "put", "rm", "touch", "query", "ddoc", "pager", "ctl", "stats", "search", "audit", "version", "completion"} {
		if r.code != 0 || !strings.Contains(r.out, "\n  "+c+" ") {
			t.Errorf("--help does not list %s: %v", c, r)
		}
	}
	if r := runCmdResult(); r.code != 2 || !strings.Contains(r.errOut, "Documents:\n") || !strings.Contains(r.errOut, "needs a command") {
		t.Errorf("no command: %v", r)
	}
	if r := runCmdResult("load", "--help"); r.code != 0 || !strings.Contains(r.out, "--key-column") || !strings.Contains(r.out, "--concurrency") {
		t.Errorf("load --help: %v", r)
	}
}
