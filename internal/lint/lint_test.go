// Package lint holds Mayfly's project rules, written as tests so `make test`
// enforces them.
package lint

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// rule is a pattern that must not appear in non-test Go files, except in the
// files it allows, or on a line whose comment holds the rule's own marker
// followed by the reason: "wall clock: <reason>" for time.Now (e.g. to time
// a run), "lint:allow <id> <reason>" for the others. A marker exempts a line
// from its rule only, never from the others.
type rule struct {
	name    string
	re      *regexp.Regexp
	marker  string // in a line's comment, exempts that line from this rule
	allowed func(path string) bool
}

// projectRules are the rules TestProjectRules enforces.
func projectRules() []rule {
	return []rule{
		{"time.Now outside engine/clock.go", regexp.MustCompile(`\btime\.Now\(`), "wall clock: ", func(p string) bool {
			return strings.HasSuffix(p, filepath.Join("engine", "clock.go"))
		}},
		{"http.DefaultServeMux", regexp.MustCompile(`http\.DefaultServeMux`), "lint:allow default-mux ", nil},
		{"http.ListenAndServe", regexp.MustCompile(`http\.ListenAndServe\(`), "lint:allow listen-and-serve ", nil},
		{"log.Fatal outside cmd/", regexp.MustCompile(`\blog\.Fatal`), "lint:allow log-fatal ", func(p string) bool {
			return strings.Contains(p, string(filepath.Separator)+"cmd"+string(filepath.Separator))
		}},
		{"error compared with == or != (use errors.Is)", regexp.MustCompile(`[!=]=\s*(\w+\.)?Err[A-Z]\w*\b|\b(\w+\.)?Err[A-Z]\w*\s*[!=]=`), "lint:allow error-compare ", nil},
	}
}

// violations returns the names of the rules line (of the file at path)
// breaks.
func violations(rules []rule, path, line string) []string {
	code, comment, _ := strings.Cut(line, "//")
	var out []string
	for _, r := range rules {
		if !r.re.MatchString(code) || strings.Contains(comment, r.marker) {
			continue
		}
		if r.allowed != nil && r.allowed(path) {
			continue
		}
		out = append(out, r.name)
	}
	return out
}

func goFiles(t *testing.T) []string {
	t.Helper()
	root := filepath.Join("..", "..")
	var files []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "data") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestProjectRules: no wall clock outside the clock (expiry decisions read the
// injected engine.Clock), no default mux or bare ListenAndServe, no log.Fatal
// or panics on input outside cmd/, no error comparisons with == or !=.
func TestProjectRules(t *testing.T) {
	rules := projectRules()
	for _, path := range goFiles(t) {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for n := 1; sc.Scan(); n++ {
			for _, name := range violations(rules, path, sc.Text()) {
				t.Errorf("%s:%d: %s: %s", path, n, name, strings.TrimSpace(sc.Text()))
			}
		}
		f.Close()
	}
}

// TestMarkerExemptsOnlyItsRule: a rule's marker exempts a line from that
// rule, not from the others, and only in the line's comment.
func TestMarkerExemptsOnlyItsRule(t *testing.T) {
	rules := projectRules()
	path := filepath.Join("..", "..", "views", "x.go")
	for _, c := range []struct {
		line string
		want []string
	}{
		{`start := time.Now()`, []string{"time.Now outside engine/clock.go"}},
		{`start := time.Now() // wall clock: a rate`, nil},
		{`if err == ErrX { start = time.Now() } // wall clock: a rate`, []string{"error compared with == or != (use errors.Is)"}},
		{`if err == ErrX { // wall clock: not this rule's marker`, []string{"error compared with == or != (use errors.Is)"}},
		{`if err == ErrX { // lint:allow error-compare a sentinel compared on purpose`, nil},
		{`s := "wall clock: "; t := time.Now()`, []string{"time.Now outside engine/clock.go"}},
		{`log.Fatal(err) // lint:allow error-compare wrong rule`, []string{"log.Fatal outside cmd/"}},
	} {
		if got := violations(rules, path, c.line); !slices.Equal(got, c.want) {
			t.Errorf("%s: %q, want %q", c.line, got, c.want)
		}
	}
}
