package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// releaseBinaryPages takes the pages of the server's own executable that
// are mapped read-only (its code, read-only data and the runtime's
// function tables) out of the process's page tables, and returns how many
// bytes of mappings it advised. The pages stay in the page cache; the next
// touch maps them back at the cost of a minor fault.
//
// Why: a Go binary maps its file, and every page it has touched since
// start counts in its resident memory (RssFile), with the kernel's
// fault-around mapping 64 KiB per fault, or a whole large folio where the
// page cache holds the file in large folios (up to 2 MiB: so a binary just
// written by the Go linker, which writes through a mapping; one installed
// by cp or a package manager is cached in small pages). Start-up touches a page or more of nearly every linked package
// (339 package initialisers, the flags, opening the stores), so a server
// that then serves only the memcached port held 22-36 MB of its 57 MB
// binary resident, where its steady work needs a few (BENCHMARKS.md,
// "Resident memory of an idle server").
//
// Only private read-only mappings with no anonymous (copied) pages are
// advised: MADV_DONTNEED on them loses nothing, as their contents are the
// file's. A page the dynamic loader wrote (RELRO) is anonymous and skipped.
func releaseBinaryPages() (int64, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, fmt.Errorf("release binary pages: %w", err)
	}
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return 0, fmt.Errorf("release binary pages: %w", err)
	}
	var released int64
	for _, m := range binaryMappings(smaps, exe) {
		if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, m.lo, m.hi-m.lo, syscall.MADV_DONTNEED); errno != 0 {
			return released, fmt.Errorf("release binary pages: madvise %#x-%#x: %w", m.lo, m.hi, errno)
		}
		released += int64(m.hi - m.lo)
	}
	return released, nil
}

// mapping is one address range of /proc/self/smaps.
type mapping struct{ lo, hi uintptr }

// binaryMappings returns the mappings of smaps (the text of
// /proc/PID/smaps) that are private, not writable, of the file at path, and
// hold no anonymous page.
func binaryMappings(smaps []byte, path string) []mapping {
	var out []mapping
	var cur mapping
	candidate := false
	flush := func() {
		if candidate {
			out = append(out, cur)
		}
		candidate = false
	}
	sc := bufio.NewScanner(bytes.NewReader(smaps))
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		if len(f) >= 5 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
			// A mapping's header: range perms offset dev inode [path].
			flush()
			lo, hi, ok := strings.Cut(f[0], "-")
			l, err1 := strconv.ParseUint(lo, 16, 64)
			h, err2 := strconv.ParseUint(hi, 16, 64)
			if !ok || err1 != nil || err2 != nil || len(f) < 6 {
				continue
			}
			perms := f[1]
			name := strings.Join(f[5:], " ")
			if name == path && len(perms) == 4 && perms[1] == '-' && perms[3] == 'p' {
				cur, candidate = mapping{uintptr(l), uintptr(h)}, true
			}
			continue
		}
		if candidate && len(f) >= 2 && f[0] == "Anonymous:" && f[1] != "0" {
			candidate = false // a page was copied on write: its contents are not the file's
		}
	}
	flush()
	return out
}
