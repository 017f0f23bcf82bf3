package main

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// TestBinaryMappings: of an smaps text, only the executable's private
// read-only mappings without a copied page are chosen.
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
`
	got := binaryMappings([]byte(smaps), "/opt/mayfly")
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
	before := rssFileKB(t)
	n, err := releaseBinaryPages()
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
	if got := binaryMappings([]byte("00400000-00402000 r-xp 0 0:0 1 /x\n"), "/x"); len(got) != 1 {
		t.Fatalf("after the release, binaryMappings = %v", got)
	}
	if strings.Count(string(stack()), "\n") < 2 {
		t.Fatal("no stack trace after the release")
	}
}

func stack() []byte {
	buf := make([]byte, 1<<16)
	return buf[:runtime.Stack(buf, false)]
}
