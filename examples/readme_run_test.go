package examples_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/internal/mayflybin"
)

// The README's shell examples are run by TestReadmeRunsInOrder, top to
// bottom, as a new user would run them against a fresh `make run`. The
// README's conventions, which the test reads:
//
//   - Every ```sh block is run with bash, block after block, each command
//     in order; a block whose first line is a comment starting with
//     "# README test: skipped" is not (it starts or stops a server, say).
//   - A comment "# → ANSWER" after a command (on its line, or on the lines
//     right below it, continued by comment lines starting "#  ") is what the
//     command answers. A JSON ANSWER matches the next JSON value of the
//     output that holds it: every field it names, with that value (objects
//     may hold more fields; arrays have the length shown). Any other ANSWER
//     is text the output contains, "..." standing for anything.
//   - A command without an answer must exit 0 and must not answer an
//     error (`"error":` or an HTTP status of 400 or more).
//
// The README's address, localhost:8091 (or 127.0.0.1:8091) and memcached's
// 127.0.0.1:11211, are rewritten to the ports the test's server listens on.

// readmeSkipMarker starts the first line of a block the test does not run.
const readmeSkipMarker = "# README test: skipped"

// readmeCmd is one command of a README shell block.
type readmeCmd struct {
	line    int      // the README line it starts on
	text    string   // the command as bash reads it (comments included)
	answers []string // the answers the README shows after it, in order
}

// readmeBlock is one ```sh block of the README.
type readmeBlock struct {
	line    int    // the README line of its opening fence
	heading string // the section it sits in
	skip    string // the skip comment, when the test does not run it
	cmds    []readmeCmd
}

// readmeShellBlocks parses the README's ```sh blocks.
func readmeShellBlocks(readme string) ([]readmeBlock, error) {
	var blocks []readmeBlock
	lines := strings.Split(readme, "\n")
	heading := ""
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.HasPrefix(l, "#") {
			heading = l
		}
		if strings.TrimSpace(l) != "```sh" {
			continue
		}
		indent := l[:strings.Index(l, "```")]
		start := i
		var body []string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			body = append(body, strings.TrimPrefix(lines[i], indent))
		}
		if i == len(lines) {
			return nil, fmt.Errorf("README line %d: ```sh block never closed", start+1)
		}
		b := readmeBlock{line: start + 1, heading: heading}
		if len(body) > 0 && strings.HasPrefix(body[0], readmeSkipMarker) {
			b.skip = body[0]
		} else {
			cmds, err := splitCommands(body, start+2)
			if err != nil {
				return nil, err
			}
			b.cmds = cmds
		}
		blocks = append(blocks, b)
	}
	return blocks, nil
}

// splitCommands splits a shell block's lines (the first being README line
// first) into commands: a command goes on past a line's end inside quotes,
// after a backslash, a pipe or && / ||, and through a here-document.
// Comments beginning "# →" become the answers of the command before them.
func splitCommands(body []string, first int) ([]readmeCmd, error) {
	var cmds []readmeCmd
	var cur *readmeCmd
	var text strings.Builder
	var single, double bool
	heredoc := ""
	inAnswer := false // the last line was an answer: "#  " lines continue it
	for n, line := range body {
		lineNo := first + n
		if heredoc != "" {
			text.WriteString(line + "\n")
			if line == heredoc {
				heredoc = ""
				cur.text = text.String()
				cmds = append(cmds, *cur)
				cur, text = nil, strings.Builder{}
			}
			continue
		}
		if cur == nil && !single && !double {
			trimmed := strings.TrimSpace(line)
			if trimmed == "" {
				inAnswer = false
				continue
			}
			if strings.HasPrefix(trimmed, "#") {
				switch c := strings.TrimSpace(strings.TrimPrefix(trimmed, "#")); {
				case strings.HasPrefix(c, "→"):
					if len(cmds) == 0 {
						return nil, fmt.Errorf("README line %d: an answer before any command", lineNo)
					}
					last := &cmds[len(cmds)-1]
					last.answers = append(last.answers, strings.TrimSpace(strings.TrimPrefix(c, "→")))
					inAnswer = true
				case inAnswer && strings.HasPrefix(trimmed, "#  "):
					last := &cmds[len(cmds)-1]
					last.answers[len(last.answers)-1] += c
				default:
					inAnswer = false
				}
				continue
			}
			cur = &readmeCmd{line: lineNo}
		}
		inAnswer = false
		text.WriteString(line + "\n")
		// Scan the line for quotes, a comment and a here-document.
		comment, commentAt := "", len(line)
		prev := ' '
		for j := 0; j < len(line); j++ {
			c := line[j]
			switch {
			case single:
				single = c != '\''
			case double && c == '\\':
				j++
			case double:
				double = c != '"'
			case c == '\\':
				j++
			case c == '\'':
				single = true
			case c == '"':
				double = true
			case c == '#' && (prev == ' ' || prev == '\t'):
				comment, commentAt = line[j+1:], j
				j = len(line)
			case c == '<' && strings.HasPrefix(line[j:], "<<") && !strings.HasPrefix(line[j:], "<<<"):
				m := regexp.MustCompile(`^<<-?\s*'?"?(\w+)`).FindStringSubmatch(line[j:])
				if m == nil {
					return nil, fmt.Errorf("README line %d: a here-document the test cannot read", lineNo)
				}
				heredoc = m[1]
			}
			if j < len(line) {
				prev = rune(line[j])
			}
		}
		if c := strings.TrimSpace(comment); strings.HasPrefix(c, "→") {
			cur.answers = append(cur.answers, strings.TrimSpace(strings.TrimPrefix(c, "→")))
			inAnswer = true
		}
		if single || double || heredoc != "" {
			continue
		}
		code := strings.TrimSpace(line[:commentAt])
		if strings.HasSuffix(code, "\\") || strings.HasSuffix(code, "|") || strings.HasSuffix(code, "&&") || strings.HasSuffix(code, "||") {
			continue
		}
		cur.text = text.String()
		cmds = append(cmds, *cur)
		cur, text = nil, strings.Builder{}
	}
	if cur != nil {
		return nil, fmt.Errorf("README line %d: a command that does not end", cur.line)
	}
	return cmds, nil
}

// TestReadmeParse checks the parser on the shapes the README uses, so a
// README test that passes has run what the README shows.
func TestReadmeParse(t *testing.T) {
	body := strings.Split(`curl -X PUT localhost:8091/a -d '{"x":1}'  # → {"id":"a"}
# a comment
curl localhost:8091/b \
  -d '{"y":
       2}'
# → {"rows":[{"key":null,
#     "value":20}]}
# → second
printf '%s\n' 'a # not a comment' |
  curl --data-binary @- localhost:8091/c
cat > people.csv <<'EOF'
email,name
# inside
EOF
echo done && echo "#x"`, "\n")
	cmds, err := splitCommands(body, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		line    int
		answers []string
	}{
		{1, []string{`{"id":"a"}`}},
		{3, []string{`{"rows":[{"key":null,"value":20}]}`, "second"}},
		{9, nil},
		{11, nil},
		{15, nil},
	}
	if len(cmds) != len(want) {
		t.Fatalf("%d commands, want %d: %+v", len(cmds), len(want), cmds)
	}
	for i, w := range want {
		if cmds[i].line != w.line || strings.Join(cmds[i].answers, "|") != strings.Join(w.answers, "|") {
			t.Errorf("command %d: line %d answers %q, want line %d answers %q", i, cmds[i].line, cmds[i].answers, w.line, w.answers)
		}
	}
	if !strings.HasSuffix(cmds[3].text, "EOF\n") || !strings.Contains(cmds[1].text, "2}'") {
		t.Errorf("commands' text: %+v", cmds)
	}
}

// TestReadmeAnswerMatch checks the answer convention: subsets of JSON, text
// with "...".
func TestReadmeAnswerMatch(t *testing.T) {
	out := "HTTP/1.1 200 OK\r\nX-A: 1\r\n\r\n" + `{"id":"a","cas":17,"rows":[{"k":1,"v":2}]}` + "\n" + `{"id":"b"}`
	for _, c := range []struct {
		answers []string
		ok      bool
	}{
		{[]string{`{"id":"a"}`}, true},
		{[]string{`{"rows":[{"k":1}]}`}, true},
		{[]string{`{"id":"a"}`, `{"id":"b"}`}, true},
		{[]string{`{"id":"b"}`, `{"id":"a"}`}, false}, // in order
		{[]string{`{"rows":[]}`}, false},              // arrays have the length shown
		{[]string{`{"id":"c"}`}, false},
		{[]string{`{"cas":"17"}`}, false},
		{[]string{"HTTP/1.1 200"}, true},
		{[]string{`"rows":[...{"k":1`}, true},
		{[]string{"HTTP/1.1 404"}, false},
	} {
		if err := checkAnswers(out, c.answers); (err == nil) != c.ok {
			t.Errorf("answers %q: %v, want ok=%v", c.answers, err, c.ok)
		}
	}
}

// checkAnswers checks a command's output against the answers the README
// shows for it.
func checkAnswers(out string, answers []string) error {
	values := jsonValues(out)
	next := 0
	for _, a := range answers {
		var want any
		if err := json.Unmarshal([]byte(a), &want); err == nil && (strings.HasPrefix(a, "{") || strings.HasPrefix(a, "[")) {
			found := false
			for next < len(values) {
				v := values[next]
				next++
				if jsonHolds(v, want) {
					found = true
					break
				}
			}
			if !found {
				return fmt.Errorf("no JSON answer holds %s", a)
			}
			continue
		}
		parts := strings.Split(a, "...")
		rest := out
		for _, p := range parts {
			i := strings.Index(rest, strings.TrimSpace(p))
			if i < 0 {
				return fmt.Errorf("the output does not contain %q", a)
			}
			rest = rest[i+len(strings.TrimSpace(p)):]
		}
	}
	return nil
}

// jsonValues decodes the JSON values of an output, after HTTP headers if
// curl -i printed them; it stops at the first thing that is not JSON.
func jsonValues(out string) []any {
	body := out
	for strings.HasPrefix(body, "HTTP/") {
		_, rest, ok := strings.Cut(body, "\r\n\r\n")
		if !ok {
			return nil
		}
		body = rest
	}
	var values []any
	dec := json.NewDecoder(strings.NewReader(body))
	dec.UseNumber()
	for {
		var v any
		if err := dec.Decode(&v); err != nil {
			return values
		}
		values = append(values, v)
	}
}

// jsonHolds reports whether got holds want: every field of an object,
// arrays element by element with the same length, equal scalars.
func jsonHolds(got, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return false
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok || !jsonHolds(gv, wv) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !jsonHolds(g[i], w[i]) {
				return false
			}
		}
		return true
	case float64:
		g, ok := got.(json.Number)
		if !ok {
			return false
		}
		f, err := g.Float64()
		return err == nil && f == w
	default:
		return got == want
	}
}

// answersError reports whether an output without a README answer shows an
// error: a JSON "error" field or an HTTP status of 400 or more.
func answersError(out string) bool {
	if m := regexp.MustCompile(`(?m)^HTTP/[\d.]+ (\d{3})`).FindAllStringSubmatch(out, -1); m != nil && m[len(m)-1][1] >= "400" {
		return true
	}
	return strings.Contains(out, `"error":`)
}

// readmeServer is a `mayfly serve` started as the README's `make run` starts
// it, on ports of the test's own.
type readmeServer struct {
	httpAddr, mcAddr string
	log              func() string // what it logged so far
	stop             func()
}

// startReadmeServer builds the binary (mayflybin.Build), links it as
// dir/bin/mayfly, and starts `mayfly serve` on a fresh data directory in
// dir, administrator password "password" as `make run` gives it.
func startReadmeServer(t *testing.T, dir string) *readmeServer {
	t.Helper()
	built, err := mayflybin.Build()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "bin", "mayfly")
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(built, bin); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "serve", "--data", filepath.Join(dir, "data"),
		"--http", "127.0.0.1:0", "--memcached", "127.0.0.1:0", "--kv", "127.0.0.1:0", "--views", "127.0.0.1:0", "--search", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "MAYFLY_ADMIN_PASSWORD=password")
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	logPath := filepath.Join(dir, "server.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close() // the child holds its own descriptor
	cmd.Stderr = logf
	log := func() string { b, _ := os.ReadFile(logPath); return string(b) }
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	s := &readmeServer{log: log}
	s.stop = func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("mayfly serve: %v\n%s", err, log())
		}
	}
	addrs := make(chan [2]string, 1)
	go func() {
		var a [2]string
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			if rest, ok := strings.CutPrefix(line, "mayfly: serving HTTP on http://"); ok {
				a[0], _, _ = strings.Cut(rest, ",")
			}
			if rest, ok := strings.CutPrefix(line, "mayfly: serving memcached on "); ok {
				a[1], _, _ = strings.Cut(rest, " ")
				addrs <- a
			}
		}
		io.Copy(io.Discard, stdout)
	}()
	select {
	case a := <-addrs:
		s.httpAddr, s.mcAddr = a[0], a[1]
	case err := <-done:
		t.Fatalf("mayfly serve exited: %v\n%s", err, log())
	case <-time.After(2 * time.Minute): // only a hang
		cancel()
		t.Fatalf("mayfly serve did not listen\n%s", log())
	}
	return s
}

// TestReadmeRunsInOrder runs every shell example of the README, in order,
// against a fresh server started as `make run` starts it, and checks the
// answers the README shows. The `mayfly` commands are the binary built from
// this checkout at ./bin/mayfly, as `make build` leaves it; it is not put on
// PATH, so an example that calls a bare `mayfly` fails here as it would for
// a reader.
func TestReadmeRunsInOrder(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := readmeShellBlocks(string(readme))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	began := time.Now()
	srv := startReadmeServer(t, dir)
	t.Logf("built and started mayfly serve in %v", time.Since(began).Round(time.Millisecond))
	defer srv.stop()
	examples, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(examples, filepath.Join(dir, "examples")); err != nil {
		t.Fatal(err)
	}
	// curl as the README's reader sees it on a terminal: no progress meter;
	// a time limit that only catches a hang.
	if err := os.WriteFile(filepath.Join(dir, ".curlrc"), []byte("silent\nshow-error\nmax-time = 60\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(),
		"CURL_HOME="+dir, "HOME="+dir,
		"MAYFLY_HOST=http://"+srv.httpAddr, "MAYFLY_USER=", "MAYFLY_PASSWORD=")
	mcHost, mcPort, _ := strings.Cut(srv.mcAddr, ":")
	rewrite := strings.NewReplacer(
		"localhost:8091", srv.httpAddr, "127.0.0.1:8091", srv.httpAddr,
		"127.0.0.1:11211", srv.mcAddr, "/dev/tcp/127.0.0.1/11211", "/dev/tcp/"+mcHost+"/"+mcPort)

	ran := 0
	for bi, b := range blocks {
		if b.skip != "" {
			t.Logf("README line %d (%s): %s", b.line, b.heading, b.skip)
			continue
		}
		// One bash per block, as a reader pastes a block into one shell:
		// each command's output and exit status go to files of its own.
		var script strings.Builder
		script.WriteString("exec </dev/null\n")
		out := filepath.Join(dir, "out", fmt.Sprint(bi))
		if err := os.MkdirAll(out, 0o755); err != nil {
			t.Fatal(err)
		}
		for ci, c := range b.cmds {
			fmt.Fprintf(&script, "{\n%s\n} >'%s/%d.out' 2>'%s/%d.err'; echo $? >'%s/%d.rc'\n", rewrite.Replace(c.text), out, ci, out, ci, out, ci)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // only a hang
		cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
		cmd.Dir = dir
		cmd.Env = env
		began := time.Now()
		shellOut, err := cmd.CombinedOutput()
		cancel()
		t.Logf("README line %d (%s): %d commands in %v", b.line, b.heading, len(b.cmds), time.Since(began).Round(time.Millisecond))
		if err != nil {
			t.Errorf("README line %d (%s): bash: %v\n%s", b.line, b.heading, err, shellOut)
		}
		for ci, c := range b.cmds {
			stdout, _ := os.ReadFile(fmt.Sprintf("%s/%d.out", out, ci))
			stderr, _ := os.ReadFile(fmt.Sprintf("%s/%d.err", out, ci))
			rc, _ := os.ReadFile(fmt.Sprintf("%s/%d.rc", out, ci))
			text := string(stdout)
			var problem error
			switch {
			case strings.TrimSpace(string(rc)) != "0":
				problem = fmt.Errorf("exit status %q", strings.TrimSpace(string(rc)))
			case len(c.answers) > 0:
				problem = checkAnswers(text, c.answers)
			case answersError(text):
				problem = errors.New("it answered an error, and the README shows no answer")
			}
			if testing.Verbose() { // what a README writer needs to write an answer
				t.Logf("README line %d: %s%s%s", c.line, c.text, stdout, stderr)
			}
			if problem != nil {
				t.Errorf("README line %d (%s):\n%s%v\nstdout: %s\nstderr: %s\nthe README shows: %q",
					c.line, b.heading, c.text, problem, stdout, stderr, c.answers)
			}
			ran++
		}
	}
	if ran < 50 {
		t.Errorf("ran %d README commands; the README has more", ran)
	}
	if t.Failed() {
		t.Logf("server log:\n%s", srv.log())
	}
}
