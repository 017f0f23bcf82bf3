package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// shellWords splits a command line as sh would for the README's simple
// commands: words separated by spaces, '...' quoted.
func shellWords(line string) []string {
	var words []string
	var cur strings.Builder
	inWord, quoted := false, false
	for _, r := range line {
		switch {
		case quoted && r == '\'':
			quoted = false
		case quoted:
			cur.WriteRune(r)
		case r == '\'':
			quoted, inWord = true, true
		case r == ' ':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// TestReadmeCommands runs the example commands of the README's "Commands"
// section against a test server: each must succeed.
func TestReadmeCommands(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Commands\n")
	if !ok {
		t.Fatal(`README has no "## Commands"`)
	}
	_, block, ok := strings.Cut(section, "```sh\n")
	if !ok {
		t.Fatal(`README's "## Commands" has no sh block`)
	}
	block, _, _ = strings.Cut(block, "```")
	ddoc, err := os.ReadFile("../../examples/scores-ddoc.json")
	if err != nil {
		t.Fatal(err)
	}
	f := cliServer(t)
	dir := t.TempDir()
	for name, content := range map[string]string{
		"docs.ndjson":               `{"_id":"p1","type":"score","player":"ann","score":3}` + "\n",
		"people.csv":                "email,name,age\nada@example.com,Ada,36\n",
		"examples/scores-ddoc.json": string(ddoc),
	} {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir)
	t.Setenv("MAYFLY_HOST", f.url)
	n := 0
	for line := range strings.SplitSeq(block, "\n") {
		if i := strings.Index(line, "  #"); i >= 0 {
			line = line[:i]
		}
		for cmd := range strings.SplitSeq(line, "&&") {
			cmd = strings.TrimSpace(cmd)
			if c, ok := strings.CutPrefix(cmd, "source <("); ok {
				cmd = strings.TrimSuffix(c, ")")
			}
			words := shellWords(cmd)
			switch {
			case len(words) == 0:
				continue
			case words[0] == "export":
				for _, kv := range words[1:] {
					k, v, _ := strings.Cut(kv, "=")
					t.Setenv(k, v)
				}
				continue
			case words[0] != "./bin/mayfly":
				t.Fatalf("README command %q is not ./bin/mayfly", cmd)
			}
			var out, errOut bytes.Buffer
			if code := run(words[1:], &out, &errOut); code != 0 {
				t.Errorf("README command %q: exit %d\n%s%s", cmd, code, out.String(), errOut.String())
			}
			n++
		}
	}
	if n < 5 {
		t.Fatalf("ran %d README commands", n)
	}
}
