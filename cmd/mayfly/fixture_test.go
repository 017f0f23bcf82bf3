package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/httpapi"
	"github.com/mayflydb/mayfly/pager"
	"github.com/mayflydb/mayfly/views"
)

// t0 is the fake clock's start (Unix seconds).
const t0 = 1_700_000_000

// cliFixture is a whole server (documents, views, pager, users) over a fresh
// engine on a fake clock, with buckets "default" and "travel" and a
// collection app.people in default.
type cliFixture struct {
	url   string
	eng   *engine.Engine
	clock *engine.FakeClock
	def   *engine.Bucket
}

func cliServer(t *testing.T) *cliFixture {
	t.Helper()
	ctx := context.Background()
	clk := engine.NewFakeClock(t0)
	eng, err := engine.Open(t.TempDir(), &engine.Options{Clock: clk, NumPartitions: 8, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	def, err := eng.CreateBucket(ctx, engine.DefaultBucketSettings("default"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.CreateBucket(ctx, engine.DefaultBucketSettings("travel")); err != nil {
		t.Fatal(err)
	}
	if err := def.CreateScope(ctx, "app"); err != nil {
		t.Fatal(err)
	}
	if _, err := def.CreateCollection(ctx, "app", "people", 0); err != nil {
		t.Fatal(err)
	}
	vs, err := views.New(ctx, eng, nil)
	if err != nil {
		t.Fatal(err)
	}
	pm := pager.New(eng, nil)
	users := testUsers(t)
	srv := httptest.NewServer(httpapi.New(eng, &httpapi.Options{Views: vs, Pager: pm, Auth: users}))
	t.Cleanup(func() {
		srv.Close()
		vs.Close()
		pm.Close(context.Background())
		eng.Close()
	})
	return &cliFixture{url: srv.URL, eng: eng, clock: clk, def: def}
}

// result is one run of the command line.
type result struct {
	code        int
	out, errOut string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d, stdout %q, stderr %q", r.code, r.out, r.errOut)
}

// mf runs mayfly with args, then --host and the administrator's credentials
// (so every call also has flags after its positional arguments).
func (f *cliFixture) mf(stdin string, args ...string) result {
	var out, errOut bytes.Buffer
	args = append(args, "--host", f.url, "-u", adminUser, "-p", adminPass)
	code := runWith(strings.NewReader(stdin), args, &out, &errOut)
	return result{code, out.String(), errOut.String()}
}

// doc reads a document of the default bucket's collection (scope.collection,
// "" for the default one).
func (f *cliFixture) doc(t *testing.T, coll, key string) *engine.Document {
	t.Helper()
	c := f.def.DefaultCollection()
	if coll != "" {
		scope, name, _ := strings.Cut(coll, ".")
		var err error
		if c, err = f.def.Collection(scope, name); err != nil {
			t.Fatal(err)
		}
	}
	d, err := c.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("get %s %s: %v", coll, key, err)
	}
	return d
}

func runCmdResult(args ...string) result {
	code, out, errOut := runCmd(args...)
	return result{code, out, errOut}
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
