package main

import "testing"

// completion without a shell, or with one it does not know, is a mistake in
// the command line: exit 2, a message on stderr, nothing on stdout (where
// `source <(mayfly completion SHELL)` would read it); a review found it
// printed the help on stdout and exited 0.
func TestCompletionNeedsAKnownShell(t *testing.T) {
	for _, args := range [][]string{{"completion"}, {"completion", "tcsh"}} {
		r := runCmdResult(args...)
		if r.code != 2 || r.out != "" || r.errOut == "" {
			t.Errorf("%v: %v, want exit 2, stdout empty, a message on stderr", args, r)
		}
	}
}
