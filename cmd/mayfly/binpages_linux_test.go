package main

import (
	"errors"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// TestBinaryMappings: of an smaps text, only the executable's private
// read-only mappings without a copied page (resident or swapped out: a
// relocated page of a cgo build's RELRO) are chosen, and only those of
// its file: a mapping of another file under the same name (the binary
// rebuilt and mapped again) is not.
func TestBinaryMappings(t *testing.T) {
	const smaps = `00400000-00402000 r--p 00000000 fe:00 77   /opt/mayfly
Size:                  8 kB
Anonymous:             0 kB
VmFlags: rd mr mw me
00402000-01501000 r-xp 00002000 fe:00 77   /opt/mayfly
Anonymous:             0 kB
VmFlags: rd ex mr mw me
026e9000-026ea000 r--p 022e9000 fe:00 77   /opt/mayfly
Anonymous:             4 kB
VmFlags: rd mr mw me ac
026ea000-02969000 rw-p 022ea000 fe:00 77   /opt/mayfly
Anonymous:           160 kB
02969000-049b9000 rw-p 00000000 00:00 0
Anonymous:           160 kB
7f58f0512000-7f58f0538000 r--p 00000000 fe:00 99   /usr/lib/x86_64-linux-gnu/libc.so.6
Anonymous:             0 kB
7f58f0600000-7f58f0700000 r--s 00000000 fe:00 77   /opt/mayfly
Anonymous:             0 kB
7f58f0800000-7f58f0900000 r--p 00000000 fe:00 78   /opt/mayfly data
Anonymous:             0 kB
7f58f0900000-7f58f0901000 r--p 02300000 fe:00 77   /opt/mayfly
Anonymous:             0 kB
Swap:                  4 kB
7f58f0a00000-7f58f0b00000 r--p 00000000 fe:00 80   /opt/mayfly
Anonymous:             0 kB
7f58f0c00000-7f58f0d00000 r--p 00000000 fe:01 77   /opt/mayfly
Anonymous:             0 kB
`
	got := binaryMappings([]byte(smaps), "/opt/mayfly", binaryFile{major: 0xfe, minor: 0, ino: 77})
	want := []mapping{{0x400000, 0x402000}, {0x402000, 0x1501000}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("binaryMappings = %#v, want %#v", got, want)
	}
}

// rssFileKB reads the process's resident file-backed memory.
func rssFileKB(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "RssFile:"); ok {
			n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Skip("no RssFile in /proc/self/status")
	return 0
}

// TestReleaseBinaryPages: the test binary's own code and read-only data
// leave its resident memory, and the program runs on (the pages come back
// as it touches them).
func TestReleaseBinaryPages(t *testing.T) {
	bin, err := newBinaryPages()
	if err != nil {
		t.Fatal(err)
	}
	before := rssFileKB(t)
	n, err := bin.release()
	if err != nil {
		t.Fatal(err)
	}
	after := rssFileKB(t)
	if n == 0 || after >= before {
		t.Fatalf("released %d bytes of mappings: RssFile %d kB before, %d kB after", n, before, after)
	}
	t.Logf("released %d bytes of mappings: RssFile %d kB before, %d kB after", n, before, after)
	// Code and read-only data still work: parsing and a stack trace read
	// both.
	if got := binaryMappings([]byte("00400000-00402000 r-xp 0 0:0 1 /x\n"), "/x", binaryFile{ino: 1}); len(got) != 1 {
		t.Fatalf("after the release, binaryMappings = %v", got)
	}
	if strings.Count(string(stack()), "\n") < 2 {
		t.Fatal("no stack trace after the release")
	}
}

// TestReleaseBinaryPagesFileChanged: once the executable's file is not the
// one the process started from (rewritten in place, where the kernel's
// refusal to write a running executable does not reach), no page is
// released, then or later: MADV_DONTNEED would page in the new file's
// contents under the running code.
func TestReleaseBinaryPagesFileChanged(t *testing.T) {
	bin, err := newBinaryPages()
	if err != nil {
		t.Fatal(err)
	}
	rewritten := bin.start
	rewritten.size++
	rewritten.mtime.Nsec++
	bin.stat = func() (binaryFile, error) { return rewritten, nil }
	if n, err := bin.release(); !errors.Is(err, errBinaryChanged) || n != 0 {
		t.Fatalf("release of a changed file = %d, %v; want 0, errBinaryChanged", n, err)
	}
	// Reported once; nothing released after, even if the file looks as it
	// did.
	bin.stat = statBinary
	if n, err := bin.release(); err != nil || n != 0 {
		t.Fatalf("a later release = %d, %v; want 0, nil", n, err)
	}
}

func stack() []byte {
	buf := make([]byte, 1<<16)
	return buf[:runtime.Stack(buf, false)]
}

// TestReleaseBinaryPagesAfterHardLink: a hard link to the executable
// (perf record makes one in its build-id cache) changes its change time
// but not a byte of it, and the release goes on.
func TestReleaseBinaryPagesAfterHardLink(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := newBinaryPages()
	if err != nil {
		t.Fatal(err)
	}
	link := exe + ".link-" + strconv.Itoa(os.Getpid())
	if err := os.Link(exe, link); err != nil {
		t.Skipf("cannot hard-link the test binary here: %v", err)
	}
	defer os.Remove(link)
	if n, err := bin.release(); err != nil || n == 0 {
		t.Fatalf("release after a hard link = %d, %v; want the mappings released", n, err)
	}
}
