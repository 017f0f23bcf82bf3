package main

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// idleRSSBound is what TestIdleServeResidentMemory allows an idle server:
// about twice what one measures (13-15 MB, BENCHMARKS.md, "Resident memory
// of an idle server"), under what it was before the executable's pages
// were released (35-44 MB).
const idleRSSBound = 28 << 20

// TestIdleServeResidentMemory starts `mayfly serve` (in its own process,
// serverCommand's) on a fresh data directory with every port on, and reads
// its resident memory once start-up is over: it must stay under
// idleRSSBound.
func TestIdleServeResidentMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server process")
	}
	if raceNodes() {
		t.Skip("the race detector's shadow memory is resident too")
	}
	cmd := serverCommand(t, []string{"serve", "--data", t.TempDir(), "--http", "127.0.0.1:0",
		"--memcached", "127.0.0.1:0", "--kv", "127.0.0.1:0", "--kv-tls", "", "--views", "127.0.0.1:0",
		"--search", "127.0.0.1:0", "--admin-password", "password123", "--log-level", "debug"})
	// The server runs from a copy written in 64 KiB writes, as an
	// installation writes it: the linker's own output sits in the page
	// cache in large folios, each mapped whole on a touch (binpages_linux.go).
	bin := filepath.Join(t.TempDir(), "mayfly")
	if err := copyInChunks(bin, cmd.Path); err != nil {
		t.Fatal(err)
	}
	cmd.Path, cmd.Args[0] = bin, bin
	cmd.SysProcAttr = serverProcAttr()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	// Start-up is over when serve releases the executable's pages the
	// first time (a debug line); a minute only catches a hang.
	released := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		found := false
		for sc.Scan() {
			if !found && strings.Contains(sc.Text(), "released the executable's pages") {
				found = true
				released <- true
			}
		}
		if !found {
			released <- false
		}
	}()
	select {
	case ok := <-released:
		if !ok {
			t.Fatal("serve ended without releasing its executable's pages")
		}
	case <-time.After(time.Minute):
		t.Fatal("serve did not finish starting within a minute")
	}
	rss := procRSS(t, cmd.Process.Pid)
	t.Logf("idle serve: VmRSS %d kB", rss>>10)
	if rss > idleRSSBound {
		t.Fatalf("idle serve resident in %d kB, want under %d kB", rss>>10, idleRSSBound>>10)
	}
}

// copyInChunks copies the executable src to dst in 64 KiB writes.
func copyInChunks(dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	buf := make([]byte, 64<<10)
	for {
		n, rerr := in.Read(buf)
		if _, err := out.Write(buf[:n]); err != nil {
			out.Close()
			return err
		}
		if rerr == io.EOF {
			return out.Close()
		}
		if rerr != nil {
			out.Close()
			return rerr
		}
	}
}

// procRSS reads a process's resident memory (VmRSS) in bytes.
func procRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/PID/status")
	return 0
}
