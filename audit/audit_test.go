package audit_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

func ev(i int) audit.Event {
	return audit.Event{Time: int64(1700000000 + i), Action: audit.ActionPagerSettings, Bucket: "default",
		Before: map[string]int{"exp_pager_stime": i}, After: map[string]int{"exp_pager_stime": i + 1}}
}

// writeN writes n records to a fresh log and returns its path.
func writeN(t *testing.T, n int) string {
	t.Helper()
	l := openLog(t)
	for i := range n {
		if err := l.Record(context.Background(), ev(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return l.Path()
}

func verifyFile(t *testing.T, path string) (audit.Report, error) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return audit.Verify(f)
}

// mustBreakAt verifies lines and wants the chain broken at line.
func mustBreakAt(t *testing.T, what string, lines []string, line int) {
	t.Helper()
	_, err := audit.Verify(strings.NewReader(strings.Join(lines, "\n") + "\n"))
	var ce *audit.ChainError
	if !errors.As(err, &ce) || ce.Line != line {
		t.Fatalf("%s: Verify = %v, want a break at line %d", what, err, line)
	}
}

func TestRecord_Format(t *testing.T) {
	l := openLog(t)
	ctx := context.Background()
	if err := l.Record(ctx, audit.Event{Time: 1700000000, Action: audit.ActionPagerSettings, Bucket: "default", Before: map[string]int{"exp_pager_stime": 3600}, After: map[string]int{"exp_pager_stime": 10}, Remote: "127.0.0.1:5555"}); err != nil {
		t.Fatal(err)
	}
	if err := l.Record(ctx, audit.Event{Time: 1700000001, User: "admin", Action: audit.ActionDDocDelete, Bucket: "default", Target: "dev_x", Before: json.RawMessage(`{"views":{}}`)}); err != nil {
		t.Fatal(err)
	}
	got := readLines(t, l.Path())
	h1 := audit.GenesisHash
	h2 := sha(got[0])
	want := []string{
		`{"seq":1,"prev":"` + h1 + `","time":1700000000,"user":"","remote":"127.0.0.1:5555","action":"pager.settings","bucket":"default","target":"","before":{"exp_pager_stime":3600},"after":{"exp_pager_stime":10}}`,
		`{"seq":2,"prev":"` + h2 + `","time":1700000001,"user":"admin","remote":"","action":"ddoc.delete","bucket":"default","target":"dev_x","before":{"views":{}},"after":null}`,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("file:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if audit.GenesisHash != sha(audit.Genesis) {
		t.Fatal("GenesisHash")
	}
}

func sha(s string) string {
	// The same hash the package uses, computed independently.
	return fmt.Sprintf("%x", sha256.Sum256([]byte(s)))
}

func TestVerify_Whole(t *testing.T) {
	path := writeN(t, 5)
	rep, err := verifyFile(t, path)
	lines := readLines(t, path)
	if err != nil || rep.Records != 5 || rep.Lines != 5 || rep.Head != sha(lines[4]) {
		t.Fatalf("Verify: %+v %v", rep, err)
	}
	rep, err = audit.Verify(strings.NewReader(""))
	if err != nil || rep.Records != 0 || rep.Head != audit.GenesisHash {
		t.Fatalf("empty: %+v %v", rep, err)
	}
}

func TestVerify_DetectsTampering(t *testing.T) {
	lines := readLines(t, writeN(t, 5))
	cp := func() []string { return append([]string(nil), lines...) }

	removed := append(cp()[:2], lines[3:]...) // line 3 removed
	mustBreakAt(t, "removed line", removed, 3)
	mustBreakAt(t, "removed first line", cp()[1:], 1)

	edited := cp()
	edited[1] = strings.Replace(edited[1], `"exp_pager_stime":2}`, `"exp_pager_stime":9}`, 1)
	if edited[1] == lines[1] {
		t.Fatal("edit did not apply")
	}
	mustBreakAt(t, "edited line", edited, 3)

	reordered := cp()
	reordered[1], reordered[2] = reordered[2], reordered[1]
	mustBreakAt(t, "reordered lines", reordered, 2)

	inserted := append(cp()[:2], append([]string{lines[1]}, lines[2:]...)...)
	mustBreakAt(t, "duplicated line", inserted, 3)

	garbage := append(cp()[:4], "not json", lines[4])
	mustBreakAt(t, "inserted garbage", garbage, 5)

	// An unsealed torn tail is reported.
	_, err := audit.Verify(strings.NewReader(strings.Join(lines, "\n") + "\n" + lines[0][:20]))
	var ce *audit.ChainError
	if !errors.As(err, &ce) || ce.Line != 6 || !strings.Contains(ce.Reason, "torn") {
		t.Fatalf("torn tail: %v", err)
	}
}

// TestOpen_Continues: reopening keeps what was there and continues the chain.
func TestOpen_Continues(t *testing.T) {
	path := filepath.Join(t.TempDir(), audit.FileName)
	for i := range 3 {
		l, err := audit.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if l.Torn() != nil {
			t.Fatalf("torn on a whole file: %+v", l.Torn())
		}
		for j := range 2 {
			if err := l.Record(context.Background(), ev(i*2+j)); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := verifyFile(t, path)
	if err != nil || rep.Records != 6 {
		t.Fatalf("after reopening: %+v %v", rep, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode: %v %v", fi.Mode(), err)
	}
}

// tear cuts the file's last line short (as a crash mid-write does).
func tear(t *testing.T, path string, keep int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b = b[:len(b)-1] // the newline
	i := bytes.LastIndexByte(b, '\n') + 1
	if err := os.WriteFile(path, b[:i+keep], 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestOpen_SealsTornLine(t *testing.T) {
	path := writeN(t, 3)
	tear(t, path, 30)
	l, err := audit.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if tn := l.Torn(); tn == nil || tn.Line != 3 || tn.Lines != 1 || tn.Marker != 4 {
		t.Fatalf("Torn: %+v", tn)
	}
	if err := l.Record(context.Background(), ev(9)); err != nil {
		t.Fatal(err)
	}
	l.Close()
	rep, err := verifyFile(t, path)
	if err != nil || rep.Records != 4 || rep.Lines != 5 || fmt.Sprint(rep.Torn) != "[4]" {
		t.Fatalf("after sealing: %+v %v\n%s", rep, err, strings.Join(readLines(t, path), "\n"))
	}
	lines := readLines(t, path)
	if len(lines[2]) != 30 || !strings.Contains(lines[3], `"action":"audit.torn"`) || !strings.Contains(lines[3], `"skipped_lines":1`) {
		t.Fatalf("file:\n%s", strings.Join(lines, "\n"))
	}
	// The sealed bytes are covered: editing the torn line breaks the chain.
	lines[2] = strings.Replace(lines[2], "seq", "SEQ", 1)
	mustBreakAt(t, "edited torn line", lines, 3)

	// A seal interrupted in turn, and a tear on the first line, are sealed too.
	tear(t, path, 10)
	tear(t, path, 0)
	b, _ := os.ReadFile(path)
	os.WriteFile(path, append(b, "{\"seq\":"...), 0o600)
	l, err = audit.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if rep, err := verifyFile(t, path); err != nil || rep.Records != 4 {
		t.Fatalf("after a second seal: %+v %v\n%s", rep, err, b)
	}

	first := filepath.Join(t.TempDir(), audit.FileName)
	os.WriteFile(first, []byte(`{"seq":1,"pr`), 0o600)
	l, err = audit.Open(first)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if rep, err := verifyFile(t, first); err != nil || rep.Records != 1 || rep.Lines != 2 {
		t.Fatalf("torn first line: %+v %v", rep, err)
	}
}

// TestOpen_UnterminatedRecord: a record whose newline alone was lost stays
// in the chain.
func TestOpen_UnterminatedRecord(t *testing.T) {
	path := writeN(t, 2)
	b, _ := os.ReadFile(path)
	os.WriteFile(path, b[:len(b)-1], 0o600)
	l, err := audit.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if tn := l.Torn(); tn == nil || tn.Line != 2 || tn.Lines != 0 || tn.Marker != 3 {
		t.Fatalf("Torn: %+v", tn)
	}
	l.Close()
	if rep, err := verifyFile(t, path); err != nil || rep.Records != 3 {
		t.Fatalf("%+v %v", rep, err)
	}
}

func TestOpen_RefusesCorruptLastLine(t *testing.T) {
	path := writeN(t, 2)
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("edited by hand\n")
	f.Close()
	if _, err := audit.Open(path); !errors.Is(err, audit.ErrCorrupt) {
		t.Fatalf("Open: %v", err)
	}
}

// TestRecord_Concurrent: records from many goroutines come out whole, one per
// line, and chained.
func TestRecord_Concurrent(t *testing.T) {
	l := openLog(t)
	const writers, each = 8, 25
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				e := audit.Event{Time: int64(i), Bucket: fmt.Sprint("b", w), Action: audit.ActionBucketSettings, Before: i, After: map[string]int{"n": i}}
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
	if rep, err := verifyFile(t, l.Path()); err != nil || rep.Records != writers*each {
		t.Fatalf("%+v %v", rep, err)
	}
}

func TestRecord_Errors(t *testing.T) {
	l := openLog(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.Record(ctx, ev(0)); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled ctx: %v", err)
	}
	if err := l.Record(context.Background(), audit.Event{Action: "x", After: make(chan int)}); err == nil {
		t.Fatal("unencodable value accepted")
	}
	if err := l.Record(context.Background(), audit.Event{}); err == nil {
		t.Fatal("event without an action accepted")
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
	if err := l.Record(context.Background(), ev(0)); !errors.Is(err, audit.ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
	if _, err := audit.Open(filepath.Join(t.TempDir(), "missing", "audit.log")); err == nil {
		t.Fatal("Open in a missing directory succeeded")
	}
}

// TestRecord_WriteFailureBreaks: after a failed write the log refuses
// everything (the file may hold a partial line).
func TestRecord_WriteFailureBreaks(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	l, err := audit.Open("/dev/full")
	if err != nil {
		t.Skip(err)
	}
	defer l.Close()
	if err := l.Record(context.Background(), ev(0)); !errors.Is(err, audit.ErrBroken) {
		t.Fatalf("write to a full device: %v", err)
	}
	if err := l.Record(context.Background(), ev(1)); !errors.Is(err, audit.ErrBroken) {
		t.Fatalf("after a failed write: %v", err)
	}
}

func TestIntent(t *testing.T) {
	l := openLog(t)
	ctx := context.Background()
	in, err := l.Intend(ctx, audit.Event{Action: audit.ActionBucketCreate, Bucket: "b", After: map[string]string{"name": "b"}})
	if err != nil || in.Seq() != 1 {
		t.Fatal(in.Seq(), err)
	}
	if err := in.Failed(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := in.Failed(ctx, errors.New("bucket exists")); err != nil {
		t.Fatal(err)
	}
	lines := readLines(t, l.Path())
	if len(lines) != 2 || !strings.Contains(lines[1], `"action":"bucket.create","bucket":"b","target":"","before":null,"after":null,"outcome":"failed","ref":1,"error":"bucket exists"}`) {
		t.Fatalf("file:\n%s", strings.Join(lines, "\n"))
	}
	var nilLog *audit.Log
	in, err = nilLog.Intend(ctx, ev(0))
	if err != nil || in.Failed(ctx, errors.New("x")) != nil {
		t.Fatal(err)
	}
}

// TestNilLog: a nil *Log ignores everything.
func TestNilLog(t *testing.T) {
	var l *audit.Log
	if err := l.Record(context.Background(), ev(0)); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if l.Path() != "" || l.Torn() != nil {
		t.Fatal("nil Log has a path")
	}
}

func ExampleVerify() {
	dir, _ := os.MkdirTemp("", "audit")
	defer os.RemoveAll(dir)
	l, err := audit.Open(filepath.Join(dir, audit.FileName))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()
	_ = l.Record(context.Background(), audit.Event{Time: 1700000000, Action: audit.ActionBucketDelete, Bucket: "old", Remote: "127.0.0.1:5555"})
	f, _ := os.Open(l.Path())
	defer f.Close()
	rep, err := audit.Verify(f)
	fmt.Println(rep.Records, err)
	// Output: 1 <nil>
}

// TestOpen_SealLostItsNewline: a seal whose marker was written whole but
// for its newline is kept, and the chain stays whole.
func TestOpen_SealLostItsNewline(t *testing.T) {
	path := writeN(t, 3)
	tear(t, path, 12)
	l, err := audit.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	b, _ := os.ReadFile(path)
	os.WriteFile(path, b[:len(b)-1], 0o600)
	l, err = audit.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if tn := l.Torn(); tn == nil || tn.Line != 4 || tn.Lines != 0 {
		t.Fatalf("Torn: %+v", tn)
	}
	l.Record(context.Background(), ev(7))
	l.Close()
	if rep, err := verifyFile(t, path); err != nil || rep.Records != 5 || fmt.Sprint(rep.Torn) != "[4 5]" {
		t.Fatalf("%+v %v\n%s", rep, err, strings.Join(readLines(t, path), "\n"))
	}
}

// TestOpen_TornAfterABrokenChain: Open refuses to seal a torn line after a
// chain already broken.
func TestOpen_TornAfterABrokenChain(t *testing.T) {
	path := writeN(t, 4)
	lines := readLines(t, path)
	os.WriteFile(path, []byte(lines[0]+"\n"+lines[2]+"\n"+lines[3][:10]), 0o600)
	if _, err := audit.Open(path); !errors.Is(err, audit.ErrCorrupt) {
		t.Fatalf("Open: %v", err)
	}
}
