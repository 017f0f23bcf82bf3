package main

import (
	"context"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/httpapi"
	"github.com/mayflydb/mayfly/search"
)

// searchServer is the HTTP API with the search service over a fresh engine
// holding a "default" bucket with an index "idx" on it.
func searchServer(t *testing.T) (*httptest.Server, *engine.Bucket) {
	t.Helper()
	ctx := context.Background()
	eng, err := engine.Open(t.TempDir(), &engine.Options{Clock: engine.NewFakeClock(1_700_000_000), NumPartitions: 8, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := eng.CreateBucket(ctx, engine.DefaultBucketSettings("default"))
	if err != nil {
		t.Fatal(err)
	}
	svc, err := search.New(ctx, eng, &search.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	users := testUsers(t)
	r, _ := auth.ParseRoles("data_reader[default]")
	if err := users.PutUser("reader", "", "password1", r); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.PutIndex(ctx, "default", "idx", []byte(`{"type":"fulltext-index","sourceType":"couchbase","sourceName":"default"}`)); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(eng, &httpapi.Options{Auth: users, Search: svc}))
	t.Cleanup(func() { srv.Close(); svc.Close(); eng.Close() })
	return srv, b
}

func TestSearchCommand(t *testing.T) {
	srv, b := searchServer(t)
	ctx := context.Background()
	for k, v := range map[string]string{
		"fox1": `{"text":"the quick brown fox","n":1}`,
		"fox2": `{"text":"a fox, a fox, a fox","n":2}`,
		"dog":  `{"text":"the lazy dog","n":3}`,
	} {
		if _, err := b.DefaultCollection().Upsert(ctx, k, []byte(v), nil); err != nil {
			t.Fatal(err)
		}
	}
	// Flags before and after the positional arguments.
	code, out, errOut := runCmd("search", "--host", srv.URL, "-u", adminU, "--consistent", "idx", "fox", "--size", "5")
	if code != 0 {
		t.Fatalf("search: %d %q %q", code, out, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !regexp.MustCompile(`^ID\s+SCORE$`).MatchString(lines[0]) ||
		!regexp.MustCompile(`^fox2\s+\d+\.\d{4}$`).MatchString(lines[1]) || // more foxes, the better score
		!regexp.MustCompile(`^fox1\s+\d+\.\d{4}$`).MatchString(lines[2]) || lines[3] != "total_hits: 2" {
		t.Fatalf("search fox:\n%s", out)
	}
	// The query string syntax: a field range and a must-not.
	if code, out, errOut := runCmd("search", "--host", srv.URL, "-u", adminU, "idx", "n:>=2 -text:dog"); code != 0 || !strings.HasPrefix(out, "ID") || !strings.Contains(out, "fox2") || strings.Contains(out, "dog") || !strings.HasSuffix(out, "total_hits: 1\n") {
		t.Fatalf("search n:>=2 -text:dog: %d %q %q", code, out, errOut)
	}
	// --size cuts the hits and says so.
	if code, out, _ := runCmd("search", "--host", srv.URL, "-u", adminU, "--size", "1", "idx", "fox"); code != 0 || strings.Count(out, "\n") != 3 || !strings.Contains(out, "total_hits: 2 (1 shown from 1;") {
		t.Fatalf("search --size 1: %d %q", code, out)
	}
	if code, out, _ := runCmd("search", "--host", srv.URL, "-u", adminU, "idx", "cat"); code != 0 || out != "total_hits: 0\n" {
		t.Fatalf("search cat: %d %q", code, out)
	}
	// Errors: the server's reason and exit 1.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-u", adminU, "nope", "fox"}, "nope"},
		{[]string{"-u", adminU, "idx", `"unclosed`}, "unterminated quote"},
		{[]string{"-u", "reader:password1", "idx", "fox"}, "forbidden"},
		{[]string{"-u", adminUser + ":wrong", "idx", "fox"}, "unauthorized"},
	} {
		code, out, errOut := runCmd(append([]string{"search", "--host", srv.URL}, c.args...)...)
		if code != 1 || out != "" || !strings.HasPrefix(errOut, "mayfly search: ") || !strings.Contains(strings.ToLower(errOut), c.want) {
			t.Errorf("search %v: %d %q %q (want %q)", c.args, code, out, errOut, c.want)
		}
	}
	if code, _, errOut := runCmd("search", "--host", "127.0.0.1:1", "-u", adminU, "idx", "fox"); code != 1 || !strings.Contains(errOut, "cannot reach") {
		t.Fatalf("search against no server: %d %q", code, errOut)
	}
	// The index's figures in mayfly stats (the query that did not parse
	// counts as a query and an error).
	if code, out, _ := runCmd("stats", "--host", srv.URL, "-u", adminU, "fts_idx_doc_count", "fts_idx_total_queries", "fts_idx_total_queries_error"); code != 0 ||
		out != " fts_idx_doc_count:           3\n fts_idx_total_queries:       5\n fts_idx_total_queries_error: 1\n" {
		t.Errorf("stats of the index: %d %q", code, out)
	}
	// Usage.
	for _, args := range [][]string{{"idx"}, {}, {"idx", "fox", "extra"}, {"--size", "-1", "idx", "fox"}, {"--bogus", "idx", "fox"}} {
		if code, _, _ := runCmd(append([]string{"search"}, args...)...); code != 2 {
			t.Errorf("search %v: exit %d, want 2", args, code)
		}
	}
	if code, out, _ := runCmd("search", "--help"); code != 0 || !strings.Contains(out, "query_string") || !strings.Contains(out, "--size") {
		t.Errorf("search --help: %d %q", code, out)
	}
	if code, out, _ := runCmd("help"); code != 0 || !strings.Contains(out, "search") {
		t.Errorf("help does not list search: %q", out)
	}
}
