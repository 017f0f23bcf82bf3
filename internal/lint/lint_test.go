// Package lint holds Mayfly's project rules, written as tests so `make test`
// enforces them.
package lint

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// rule is a pattern that must not appear in non-test Go files, except in the
// files it allows, or on a line that says why with a "lint:allow <reason>"
// comment (for time.Now: "wall clock: <reason>", e.g. to time a run).
type rule struct {
	name    string
	re      *regexp.Regexp
	allowed func(path string) bool
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
	rules := []rule{
		{"time.Now outside engine/clock.go", regexp.MustCompile(`\btime\.Now\(`), func(p string) bool {
			return strings.HasSuffix(p, filepath.Join("engine", "clock.go"))
		}},
		{"http.DefaultServeMux", regexp.MustCompile(`http\.DefaultServeMux`), nil},
		{"http.ListenAndServe", regexp.MustCompile(`http\.ListenAndServe\(`), nil},
		{"log.Fatal outside cmd/", regexp.MustCompile(`\blog\.Fatal`), func(p string) bool {
			return strings.Contains(p, string(filepath.Separator)+"cmd"+string(filepath.Separator))
		}},
		{"error compared with == or != (use errors.Is)", regexp.MustCompile(`[!=]=\s*(\w+\.)?Err[A-Z]\w*\b|\b(\w+\.)?Err[A-Z]\w*\s*[!=]=`), nil},
	}
	for _, path := range goFiles(t) {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			code, _, _ := strings.Cut(line, "//")
			for _, r := range rules {
				if !r.re.MatchString(code) || strings.Contains(line, "lint:allow ") || strings.Contains(line, "wall clock: ") {
					continue
				}
				if r.allowed != nil && r.allowed(path) {
					continue
				}
				t.Errorf("%s:%d: %s: %s", path, n, r.name, strings.TrimSpace(line))
			}
		}
		f.Close()
	}
}
