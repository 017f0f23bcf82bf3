package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/httpapi"
	"github.com/mayflydb/mayfly/pager"
)

// apiServer is the HTTP API over a fresh engine with a "default" bucket.
func apiServer(t *testing.T) (*httptest.Server, *engine.Bucket) {
	t.Helper()
	eng, err := engine.Open(t.TempDir(), &engine.Options{Clock: engine.NewFakeClock(1_700_000_000), NumPartitions: 8, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := eng.CreateBucket(context.Background(), engine.DefaultBucketSettings("default"))
	if err != nil {
		t.Fatal(err)
	}
	pm := pager.New(eng, nil)
	srv := httptest.NewServer(testHandler(t, eng, pm))
	t.Cleanup(func() { srv.Close(); pm.Close(context.Background()); eng.Close() })
	return srv, b
}

// The test administrator; cheap argon2 parameters and 100 SCRAM iterations
// (testUsers) keep the tests fast.
const (
	adminUser = "Administrator"
	adminPass = "password"
	adminU    = adminUser + ":" + adminPass
)

// testHandler is the HTTP API over eng with the test administrator.
func testHandler(t *testing.T, eng *engine.Engine, pm *pager.Manager) http.Handler {
	t.Helper()
	return httpapi.New(eng, &httpapi.Options{Pager: pm, Auth: testUsers(t)})
}

// testUsers is a user store holding the test administrator.
func testUsers(t *testing.T) *auth.Store {
	t.Helper()
	users, err := auth.Open(t.TempDir(), &auth.Options{AdminUser: adminUser, AdminPassword: adminPass,
		Argon2: &auth.Argon2Params{Time: 1, Memory: 64, Threads: 1, KeyLen: 32}, ScramIterations: 100})
	if err != nil {
		t.Fatal(err)
	}
	return users
}

func runCmd(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestHelpAndUnknownCommands(t *testing.T) {
	if code, out, _ := runCmd("help"); code != 0 || !strings.Contains(out, "serve") || !strings.Contains(out, "ctl") || !strings.Contains(out, "stats") {
		t.Fatalf("help: %d %s", code, out)
	}
	if code, _, errOut := runCmd("frobnicate"); code != 2 || !strings.Contains(errOut, "unknown command") {
		t.Fatalf("unknown command: %d %s", code, errOut)
	}
	// Help is generated (cobra) and goes to stdout.
	code, helpOut, _ := runCmd("serve", "--help")
	if code != 0 {
		t.Fatalf("serve --help exit %d", code)
	}
	for _, flag := range []string{"-data", "-http", "-memcached", "-memcached-bucket", "-memcached-max-conns", "-js-timeout", "-default-bucket", "-admin-user", "-admin-password", "-allowed-hosts", "-cors-origin", "-metrics-token", "-max-requests", "-max-streams-per-user", "-tls-cert", "-tls-key", "-read-timeout", "-write-timeout", "-idle-timeout", "-memcached-allow-remote", "-view-cache-mb"} {
		if !strings.Contains(helpOut, "-"+flag) {
			t.Errorf("serve --help does not list -%s", flag)
		}
	}
	if code, _, _ := runCmd("serve", "--bogus"); code != 2 {
		t.Fatalf("serve --bogus exit %d", code)
	}
}

func TestCtlSetAndGet(t *testing.T) {
	srv, b := apiServer(t)
	code, out, errOut := runCmd("ctl", "--host", srv.URL, "-u", adminU, "-b", "default", "set", "flush_param", "exp_pager_stime", "10")
	if code != 0 || out != "setting param: exp_pager_stime 10\nset exp_pager_stime to 10\n" {
		t.Fatalf("ctl set: %d %q %q", code, out, errOut)
	}
	if b.Settings().ExpPagerStime != 10 {
		t.Fatalf("setting not applied: %+v", b.Settings())
	}
	if code, out, _ := runCmd("ctl", "--host", srv.URL, "-u", adminU, "get", "flush_param", "exp_pager_stime"); code != 0 || out != "exp_pager_stime 10\n" {
		t.Fatalf("ctl get: %d %q", code, out)
	}
	if code, _, errOut := runCmd("ctl", "--host", srv.URL, "-u", adminU, "set", "flush_param", "exp_pager_stime", "-5"); code != 1 || !strings.Contains(errOut, "exp_pager_stime") {
		t.Fatalf("ctl set -5: %d %q", code, errOut)
	}
	if code, _, errOut := runCmd("ctl", "--host", srv.URL, "-u", adminU, "-b", "nope", "get", "flush_param", "exp_pager_stime"); code != 1 || !strings.Contains(errOut, "nope") {
		t.Fatalf("ctl on a missing bucket: %d %q", code, errOut)
	}
	if code, _, _ := runCmd("ctl", "--host", srv.URL, "-u", adminU, "set", "flush_param", "exp_pager_stime"); code != 2 {
		t.Fatalf("ctl with a missing value: %d", code)
	}
	for _, u := range []string{adminUser + ":wrong", "nobody:" + adminPass} {
		if code, _, errOut := runCmd("ctl", "--host", srv.URL, "-u", u, "get", "flush_param", "exp_pager_stime"); code != 1 || !strings.Contains(errOut, "unauthorized") {
			t.Fatalf("ctl -u %s: %d %q", u, code, errOut)
		}
	}
	t.Setenv("MAYFLY_USER", "")
	if code, _, errOut := runCmd("ctl", "--host", srv.URL, "get", "flush_param", "exp_pager_stime"); code != 1 || !strings.Contains(errOut, "-u user:password") {
		t.Fatalf("ctl without -u: %d %q", code, errOut)
	}
	t.Setenv("MAYFLY_USER", adminUser)
	t.Setenv("MAYFLY_PASSWORD", adminPass)
	if code, out, errOut := runCmd("ctl", "--host", srv.URL, "get", "flush_param", "exp_pager_stime"); code != 0 || out != "exp_pager_stime 10\n" {
		t.Fatalf("ctl with MAYFLY_USER: %d %q %q", code, out, errOut)
	}
	if code, _, errOut := runCmd("ctl", "--host", "127.0.0.1:1", "get", "flush_param", "exp_pager_stime"); code != 1 || !strings.Contains(errOut, "cannot reach") {
		t.Fatalf("ctl against no server: %d %q", code, errOut)
	}
}

func TestStats(t *testing.T) {
	srv, b := apiServer(t)
	b.DefaultCollection().Upsert(context.Background(), "a", []byte(`1`), nil)
	code, out, _ := runCmd("stats", "--host", srv.URL, "-u", adminU)
	if code != 0 || !strings.Contains(out, " curr_items:") || !strings.Contains(out, "ep_expired_pager:") {
		t.Fatalf("stats: %d %s", code, out)
	}
	if code, out, _ := runCmd("stats", "--host", srv.URL, "-u", adminU, "curr_items"); code != 0 || out != " curr_items: 1\n" {
		t.Fatalf("stats curr_items: %d %q", code, out)
	}
}

// Flags out of range are refused with a message, not taken as the default.
func TestServeRefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--js-timeout", "-1s"},
		{"--js-timeout", "0s"},
		{"--js-workers", "-2"},
		{"--shutdown-timeout", "-1s"},
		{"--memcached-max-conns", "0"},
		{"--memcached-durability", "safe"},
		{"--memcached-io", "threads"},
		{"--flush-interval", "0s"},
		{"--view-cache-mb", "-1"},
		{"--storage", "leveldb"},
		{"--heap-ratio", "1.05"},
		{"--heap-ratio", "3"},
		{"--heap-ratio", "-1"},
		{"--heap-headroom-mb", "-1"},
		{"--memory-overhead-mb", "-2"},
		{"--memory-overhead-mb", "lots"},
		{"--memory-overhead-mb", "1.5"},
	} {
		var stderr strings.Builder
		if _, err := parseServeFlags(args, &stderr); !errors.Is(err, errUsage) || !strings.Contains(stderr.String(), args[0]) {
			t.Errorf("%v: err %v, stderr %q", args, err, stderr.String())
		}
	}
}

// --storage picks the engine's store for new buckets; pebble by default.
func TestServeStorageFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, engine.StoragePebble},
		{[]string{"--storage", "bolt"}, engine.StorageBolt},
		{[]string{"--storage", "pebble"}, engine.StoragePebble},
	} {
		cfg, err := parseServeFlags(c.args, io.Discard)
		if err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		if got := cfg.engineOptions(nil).Storage; got != c.want {
			t.Errorf("%v: engine store %q, want %q", c.args, got, c.want)
		}
	}
}

// A port that is taken fails the start before anything is created: no data
// directory, no default bucket.
func TestServeBindsBeforeCreating(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, args := range [][]string{
		{"--http", taken.Addr().String(), "--memcached", ""},
		{"--http", "127.0.0.1:0", "--memcached", taken.Addr().String()},
		{"--http", "127.0.0.1:0", "--memcached", "", "--kv", taken.Addr().String()},
		{"--http", "127.0.0.1:0", "--memcached", "", "--kv", "", "--views", taken.Addr().String()},
		{"--http", "127.0.0.1:0", "--memcached", "", "--kv", "", "--views", "", "--search", taken.Addr().String()},
	} {
		data := filepath.Join(t.TempDir(), "data")
		// Every port but the taken one is free (port 0) or off.
		args = append([]string{"--data", data, "--admin-password", "password", "--kv", "127.0.0.1:0", "--views", "127.0.0.1:0", "--search", "127.0.0.1:0"}, args...)
		err := runServe(context.Background(), args, io.Discard, io.Discard)
		if err == nil {
			t.Fatalf("%v: started on a taken port", args)
		}
		if _, serr := os.Stat(data); !errors.Is(serr, os.ErrNotExist) {
			t.Errorf("%v: failed with %v but left %s behind", args, err, data)
		}
	}
}

// A --default-bucket the engine would refuse is a usage error before the
// data directory is made: the bucket is created on a first start only (no
// catalog yet), so a start that made the catalog and then failed to create
// the bucket left a directory where, the flag corrected, no default bucket
// was ever created.
func TestServeRefusesBadDefaultBucketFirst(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	var stdout, stderr strings.Builder
	code := run([]string{"serve", "--data", dir, "--default-bucket", "bad name!", "--http", "127.0.0.1:0",
		"--memcached", "", "--kv", "", "--kv-tls", "", "--views", "", "--search", "", "--admin-password", adminPass}, &stdout, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), "--default-bucket") {
		t.Errorf("serve --default-bucket 'bad name!': exit %d, stderr %q", code, stderr.String())
	}
	if engine.IsDataDir(dir) {
		t.Errorf("a refused start left a data directory: a corrected start would not create its default bucket")
	}
}

// A first start that made the data directory but ended before its default
// bucket was created (killed, or failed) is a first start again: the next
// start creates the bucket. A start after the first one ended does not
// create it again once deleted.
func TestServeFinishesAnUnfinishedFirstStart(t *testing.T) {
	t.Setenv("MAYFLY_ADMIN_PASSWORD", "password")
	dir := t.TempDir()
	// What a start killed just after opening the data directory leaves.
	eng, err := engine.Open(dir, &engine.Options{NumPartitions: 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	start := func() {
		t.Helper()
		var stdout syncBuffer
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- runServe(ctx, []string{"--data", dir, "--http", "127.0.0.1:0", "--memcached", "", "--kv", "", "--kv-tls", "", "--views", "", "--search", "", "--log-level", "error"}, &stdout, io.Discard)
		}()
		served(t, &stdout, "serving HTTP on http://")
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	buckets := func() []string {
		t.Helper()
		eng, err := engine.Open(dir, &engine.Options{NumPartitions: 4})
		if err != nil {
			t.Fatal(err)
		}
		defer eng.Close()
		var names []string
		for _, b := range eng.Buckets() {
			names = append(names, b.Name())
		}
		return names
	}
	start()
	if got := buckets(); len(got) != 1 || got[0] != "default" {
		t.Fatalf("buckets after the start that followed an unfinished first start: %v, want [default]", got)
	}
	eng, err = engine.Open(dir, &engine.Options{NumPartitions: 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.DeleteBucket(context.Background(), "default"); err != nil {
		t.Fatal(err)
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	start()
	if got := buckets(); len(got) != 0 {
		t.Fatalf("a deleted default bucket was created again by a later start: %v", got)
	}
}
