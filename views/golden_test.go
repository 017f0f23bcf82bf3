package views_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/views"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of views/testdata golden files")

// A golden file is a list of directives, each:
//
//	command args...
//	input lines (optional)
//	----
//	expected output (until a blank line)
//
// Commands:
//
//	ddoc NAME            input: the design document JSON
//	put KEY [expiry=E] [flags=F]   input: the value
//	bulk N               puts d0000..d(N-1) = {"type":"t<i%3>","n":<i>,"v":<i%7>,"g":[<i%2>,<i%3>,<i%5>]}
//	delete KEY
//	touch KEY EXPIRY
//	get KEY              a KV read (an expired document is purged lazily)
//	advance SECONDS      moves the fake clock
//	pager-run            purges every expired document, as the expiry pager does
//	restart              closes and reopens the engine and the views service
//	query DDOC VIEW [?params]   input (optional): a POST body; stale=false unless given
//	info DDOC            map error counts per view
type directive struct {
	comments []string // lines starting with # before the directive
	cmd      string
	args     []string
	input    string
	expected string
	line     int
}

func parseGolden(t *testing.T, path string) []directive {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []directive
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	n := 0
	var comments []string
	next := func() (string, bool) {
		if !sc.Scan() {
			return "", false
		}
		n++
		return sc.Text(), true
	}
	for {
		line, ok := next()
		if !ok {
			break
		}
		if strings.HasPrefix(line, "#") {
			comments = append(comments, line)
			continue
		}
		if strings.TrimSpace(line) == "" {
			continue
		}
		fields := strings.Fields(line)
		d := directive{comments: comments, cmd: fields[0], args: fields[1:], line: n}
		comments = nil
		var in, exp []string
		sawSep := false
		for {
			l, ok := next()
			if !ok {
				break
			}
			if !sawSep {
				if l == "----" {
					sawSep = true
					continue
				}
				in = append(in, l)
				continue
			}
			if l == "" {
				break
			}
			exp = append(exp, l)
		}
		if !sawSep {
			t.Fatalf("%s:%d: %s has no ---- line", path, d.line, d.cmd)
		}
		d.input, d.expected = strings.Join(in, "\n"), strings.Join(exp, "\n")
		out = append(out, d)
	}
	return out
}

// goldenEnv is the database a golden file drives.
type goldenEnv struct {
	t   *testing.T
	dir string
	clk *engine.FakeClock
	eng *engine.Engine
	svc *views.Service
}

const t0 = 1_700_000_000

func (g *goldenEnv) open() {
	var err error
	g.eng, err = engine.Open(g.dir, &engine.Options{Clock: g.clk, NumPartitions: 8, NoSync: true})
	if err != nil {
		g.t.Fatal(err)
	}
	if _, err := g.eng.Bucket("default"); err != nil {
		if _, err := g.eng.CreateBucket(context.Background(), engine.DefaultBucketSettings("default")); err != nil {
			g.t.Fatal(err)
		}
	}
	g.svc, err = views.New(context.Background(), g.eng, &views.Options{BatchSize: 100, NoAutoUpdate: true})
	if err != nil {
		g.t.Fatal(err)
	}
}

func (g *goldenEnv) close() {
	g.svc.Close()
	g.eng.Close()
}

func (g *goldenEnv) coll() *engine.Collection {
	b, err := g.eng.Bucket("default")
	if err != nil {
		g.t.Fatal(err)
	}
	return b.DefaultCollection()
}

// kv returns the number of d's name=N argument, 0 when there is none; a
// value that is not a number fails the test (a typo in a golden file must
// not silently become 0).
func (g *goldenEnv) kv(d directive, name string) int64 {
	for _, a := range d.args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return g.num(d, v)
		}
	}
	return 0
}

// num parses a number of directive d, failing the test if it is not one.
func (g *goldenEnv) num(d directive, s string) int64 {
	g.t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		g.t.Fatalf("line %d: %s: %v", d.line, d.cmd, err)
	}
	return n
}

// arg returns d's i-th argument, failing the test if it has fewer.
func (g *goldenEnv) arg(d directive, i int) string {
	g.t.Helper()
	if i >= len(d.args) {
		g.t.Fatalf("line %d: %s needs %d arguments, has %d", d.line, d.cmd, i+1, len(d.args))
	}
	return d.args[i]
}

// run executes one directive and returns its output.
func (g *goldenEnv) run(d directive) string {
	ctx := context.Background()
	switch d.cmd {
	case "ddoc":
		_, err := g.svc.PutDesignDoc(ctx, "default", g.arg(d, 0), []byte(d.input))
		return errString(err)
	case "put":
		exp, flags := g.kv(d, "expiry"), g.kv(d, "flags")
		_, err := g.coll().Upsert(ctx, g.arg(d, 0), []byte(d.input), &engine.WriteOptions{Expiry: exp, Flags: uint32(flags)})
		return errString(err)
	case "bulk":
		n := g.num(d, g.arg(d, 0))
		for i := range n {
			v := fmt.Sprintf(`{"type":"t%d","n":%d,"v":%d,"g":[%d,%d,%d]}`, i%3, i, i%7, i%2, i%3, i%5)
			if _, err := g.coll().Upsert(ctx, fmt.Sprintf("d%04d", i), []byte(v), nil); err != nil {
				return errString(err)
			}
		}
		return ""
	case "touch":
		exp := g.num(d, g.arg(d, 1))
		_, err := g.coll().Touch(ctx, d.args[0], exp)
		return errString(err)
	case "delete":
		_, err := g.coll().Delete(ctx, g.arg(d, 0), nil)
		return errString(err)
	case "get":
		doc, err := g.coll().Get(ctx, g.arg(d, 0))
		if err != nil {
			return errString(err)
		}
		return string(doc.Value)
	case "advance":
		g.clk.Advance(g.num(d, g.arg(d, 0)))
		return ""
	case "pager-run":
		b, _ := g.eng.Bucket("default")
		total := 0
		for {
			n, more, err := b.ExpireBatch(ctx, 100)
			total += n
			if err != nil {
				return errString(err)
			}
			if !more {
				break
			}
		}
		if err := b.Sync(ctx); err != nil {
			return errString(err)
		}
		return fmt.Sprintf("purged %d", total)
	case "restart":
		g.close()
		g.open()
		return ""
	case "query":
		return g.query(d)
	case "info":
		inf, err := g.svc.Info(ctx, "default", g.arg(d, 0))
		if err != nil {
			return errString(err)
		}
		var sb strings.Builder
		for _, n := range slices.Sorted(maps.Keys(inf.Views)) {
			v := inf.Views[n]
			fmt.Fprintf(&sb, "%s: rows=%d errors=%d\n", n, v.TotalRows, v.MapErrors)
			for _, e := range v.RecentErrors {
				fmt.Fprintf(&sb, "  %s: %s\n", e.DocID, e.Reason)
			}
		}
		return strings.TrimRight(sb.String(), "\n")
	}
	g.t.Fatalf("line %d: unknown command %q", d.line, d.cmd)
	return ""
}

func (g *goldenEnv) query(d directive) string {
	raw := ""
	if len(d.args) > 2 {
		raw = strings.TrimPrefix(d.args[2], "?")
	}
	q, err := url.ParseQuery(raw)
	if err != nil {
		g.t.Fatalf("line %d: %v", d.line, err)
	}
	if !q.Has("stale") {
		q.Set("stale", "false")
	}
	var body []byte
	if d.input != "" {
		body = []byte(d.input)
	}
	p, err := views.ParseParams(q, body)
	if err != nil {
		return errString(err)
	}
	prep, err := g.svc.Prepare(context.Background(), "default", d.args[0], d.args[1], p)
	if err != nil {
		return errString(err)
	}
	var buf bytes.Buffer
	if err := prep.Run(context.Background(), &buf); err != nil {
		return errString(err)
	}
	return strings.TrimSpace(strings.ReplaceAll(buf.String(), "\r\n", "\n"))
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	var qe *views.QueryError
	var de *views.DesignDocError
	switch {
	case errors.As(err, &qe):
		return "error " + qe.Code + ": " + qe.Reason
	case errors.As(err, &de):
		return "error invalid_design_document: " + de.Reason
	case errors.Is(err, views.ErrNotFound):
		return "error not_found: " + strings.TrimPrefix(err.Error(), views.ErrNotFound.Error()+": ")
	}
	return "error: " + err.Error()
}

func TestGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.txt")
	if len(files) == 0 {
		t.Fatal("no golden files in views/testdata")
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			g := &goldenEnv{t: t, dir: t.TempDir(), clk: engine.NewFakeClock(t0)}
			g.open()
			defer func() { g.close() }()
			dirs := parseGolden(t, path)
			var out strings.Builder
			failed := false
			for _, d := range dirs {
				got := g.run(d)
				if !*rewrite && got != d.expected {
					t.Errorf("%s:%d: %s %s\n got:\n%s\nwant:\n%s", path, d.line, d.cmd, strings.Join(d.args, " "), got, d.expected)
					failed = true
				}
				d.expected = got
				for _, c := range d.comments {
					out.WriteString(c + "\n")
				}
				out.WriteString(d.cmd)
				for _, a := range d.args {
					out.WriteString(" " + a)
				}
				out.WriteString("\n")
				if d.input != "" {
					out.WriteString(d.input + "\n")
				}
				out.WriteString("----\n")
				if got != "" {
					out.WriteString(got + "\n")
				}
				out.WriteString("\n")
			}
			if *rewrite && !failed {
				if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
