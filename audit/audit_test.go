package audit_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/mayflydb/mayfly/audit"
)

// openLog opens an audit log in a temporary folder, closed when the test ends.
func openLog(t *testing.T) *audit.Log {
	t.Helper()
	l, err := audit.Open(filepath.Join(t.TempDir(), audit.FileName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// readLines returns the file's lines.
func readLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

func TestRecord_Format(t *testing.T) {
	l := openLog(t)
	ctx := context.Background()
	if err := l.Record(ctx, audit.Event{Time: 1700000000, Bucket: "default", Setting: "exp_pager_stime", Old: 3600, New: 10, Remote: "127.0.0.1:5555"}); err != nil {
		t.Fatal(err)
	}
	if err := l.Record(ctx, audit.Event{Time: 1700000001, Bucket: "default", Setting: "exp_pager_initial_run_time", Old: -1, New: 7}); err != nil {
		t.Fatal(err)
	}
	got := readLines(t, l.Path())
	want := []string{
		`{"time":1700000000,"bucket":"default","setting":"exp_pager_stime","old":3600,"new":10,"remote":"127.0.0.1:5555"}`,
		`{"time":1700000001,"bucket":"default","setting":"exp_pager_initial_run_time","old":-1,"new":7,"remote":""}`,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("file:\n%s\nwant:\n%s", got, want)
	}
}

// TestOpen_Appends: reopening keeps what was there and appends after it.
func TestOpen_Appends(t *testing.T) {
	path := filepath.Join(t.TempDir(), audit.FileName)
	for i := range 3 {
		l, err := audit.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Record(context.Background(), audit.Event{Time: int64(i), Setting: "s", Old: i, New: i + 1}); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	lines := readLines(t, path)
	if len(lines) != 3 {
		t.Fatalf("%d lines: %q", len(lines), lines)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode: %v %v", fi.Mode(), err)
	}
}

// TestRecord_Concurrent: records from many goroutines come out whole, one per
// line.
func TestRecord_Concurrent(t *testing.T) {
	l := openLog(t)
	const writers, each = 8, 25
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				e := audit.Event{Time: int64(i), Bucket: fmt.Sprint("b", w), Setting: "exp_pager_stime", Old: i, New: map[string]int{"n": i}}
				if err := l.Record(context.Background(), e); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	lines := readLines(t, l.Path())
	if len(lines) != writers*each {
		t.Fatalf("%d lines, want %d", len(lines), writers*each)
	}
	seen := map[string]int{}
	for _, line := range lines {
		var e audit.Event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		seen[e.Bucket]++
	}
	for w := range writers {
		if seen[fmt.Sprint("b", w)] != each {
			t.Fatalf("per bucket: %v", seen)
		}
	}
}

func TestRecord_Errors(t *testing.T) {
	l := openLog(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.Record(ctx, audit.Event{Setting: "s"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled ctx: %v", err)
	}
	if err := l.Record(context.Background(), audit.Event{Setting: "s", New: make(chan int)}); err == nil {
		t.Fatal("unencodable value accepted")
	}
	if lines := readLines(t, l.Path()); len(lines) != 0 {
		t.Fatalf("failed records were written: %q", lines)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Record(context.Background(), audit.Event{Setting: "s"}); !errors.Is(err, audit.ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
	if _, err := audit.Open(filepath.Join(t.TempDir(), "missing", "audit.log")); err == nil {
		t.Fatal("Open in a missing directory succeeded")
	}
}

// TestNilLog: a nil *Log ignores everything.
func TestNilLog(t *testing.T) {
	var l *audit.Log
	if err := l.Record(context.Background(), audit.Event{Setting: "s"}); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if l.Path() != "" {
		t.Fatal("nil Log has a path")
	}
}

func ExampleLog_Record() {
	dir, _ := os.MkdirTemp("", "audit")
	defer os.RemoveAll(dir)
	l, err := audit.Open(filepath.Join(dir, audit.FileName))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()
	_ = l.Record(context.Background(), audit.Event{Time: 1700000000, Bucket: "default", Setting: "exp_pager_stime", Old: 3600, New: 10, Remote: "127.0.0.1:5555"})
	b, _ := os.ReadFile(l.Path())
	fmt.Print(string(b))
	// Output: {"time":1700000000,"bucket":"default","setting":"exp_pager_stime","old":3600,"new":10,"remote":"127.0.0.1:5555"}
}
