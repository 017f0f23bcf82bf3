package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/audit"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/memcache"
)

// auditDir writes n records to DIR/audit.log and returns DIR.
func auditDir(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	l, err := audit.Open(filepath.Join(dir, audit.FileName))
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := l.Record(context.Background(), audit.Event{Time: int64(i), Action: audit.ActionBucketCreate, Bucket: fmt.Sprint("b", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestAuditVerify(t *testing.T) {
	dir := auditDir(t, 3)
	path := filepath.Join(dir, audit.FileName)
	if code, out, errOut := runCmd("audit", "verify", "--data", dir); code != 0 || !strings.HasPrefix(out, "audit log whole: 3 records\nhead ") {
		t.Fatalf("verify --data: %d %q %q", code, out, errOut)
	}
	if code, out, _ := runCmd("audit", "verify", path); code != 0 || !strings.HasPrefix(out, "audit log whole: 3 records\n") {
		t.Fatalf("verify FILE: %d %q", code, out)
	}

	b, _ := os.ReadFile(path)
	lines := strings.SplitAfter(string(b), "\n")
	os.WriteFile(path, []byte(lines[0]+lines[2]), 0o600) // line 2 removed
	code, out, _ := runCmd("audit", "verify", path)
	if code != 1 || !strings.Contains(out, "audit log broken") || !strings.Contains(out, "line 2:") {
		t.Fatalf("verify with a removed line: %d %q", code, out)
	}

	if code, _, errOut := runCmd("audit", "verify", filepath.Join(dir, "missing.log")); code != 1 || !strings.Contains(errOut, "missing.log") {
		t.Fatalf("verify a missing file: %d %q", code, errOut)
	}
	for _, args := range [][]string{{"audit"}, {"audit", "frob"}, {"audit", "verify", "a", "b"}, {"audit", "verify", "--data", dir, path}, {"audit", "verify", "--bogus"}} {
		if code, _, _ := runCmd(args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
	if code, out, _ := runCmd("audit", "verify", "--help"); code != 0 || !strings.Contains(out, "mayfly audit verify [--data DIR | FILE]") {
		t.Fatalf("--help: %d %q", code, out)
	}
	if code, out, _ := runCmd("help"); code != 0 || !strings.Contains(out, "audit") {
		t.Fatalf("help does not list audit: %s", out)
	}
}

// TestMemcachedFlushAllAudited: the memcached port as serve wires it records
// flush_all in the audit log, and refuses it once the log cannot be written.
func TestMemcachedFlushAllAudited(t *testing.T) {
	eng, err := engine.Open(t.TempDir(), &engine.Options{Clock: engine.NewFakeClock(1_700_000_000), NumPartitions: 8, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	st := engine.DefaultBucketSettings("default")
	st.FlushEnabled = true // else flush_all is refused before its audit
	b, err := eng.CreateBucket(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	al, err := audit.Open(filepath.Join(dir, audit.FileName))
	if err != nil {
		t.Fatal(err)
	}
	mc, err := memcache.New(b, &memcache.Options{Audit: memcacheAudit(eng, "default", al)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mc.Serve(context.Background(), ln) }()
	defer func() {
		mc.Close()
		if err := <-done; !errors.Is(err, memcache.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	r := bufio.NewReader(nc)
	ask := func(cmd, want string) {
		t.Helper()
		fmt.Fprint(nc, cmd)
		if got, err := r.ReadString('\n'); err != nil || got != want {
			t.Fatalf("%q: %q %v, want %q", cmd, got, err, want)
		}
	}
	ask("flush_all 5\r\n", "OK\r\n")
	al.Close()
	ask("flush_all\r\n", "SERVER_ERROR audit log unavailable\r\n")
	code, out, _ := runCmd("audit", "verify", "--data", dir)
	logged, _ := os.ReadFile(filepath.Join(dir, audit.FileName))
	if code != 0 || !strings.HasPrefix(out, "audit log whole: 1 records") ||
		!strings.Contains(string(logged), `"time":1700000000,"user":"","remote":"127.0.0.1:`) ||
		!strings.Contains(string(logged), `"action":"memcached.flush_all","bucket":"default","target":"","before":null,"after":{"delay":5}}`) {
		t.Fatalf("%d %q\n%s", code, out, logged)
	}
}
