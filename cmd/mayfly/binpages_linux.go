package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// errBinaryChanged is releaseBinaryPages's answer once the executable's
// file is no longer the one the server started from.
var errBinaryChanged = errors.New("the executable's file changed since the server started: its pages are left mapped")

// binaryPages releases the pages of the server's own executable that are
// mapped read-only (its code, read-only data and the runtime's function
// tables) from the process's page tables. The pages stay in the page cache;
// the next touch maps them back at the cost of a minor fault.
//
// Why: a Go binary maps its file, and every page it has touched since
// start counts in its resident memory (RssFile), with the kernel's
// fault-around mapping 64 KiB per fault, or a whole large folio where the
// page cache holds the file in large folios (up to 2 MiB: so a binary just
// written by the Go linker, which writes through a mapping; one installed
// by cp or a package manager is cached in small pages). Start-up touches a
// page or more of nearly every linked package (339 package initialisers,
// the flags, opening the stores), so a server that then serves only the
// memcached port held 22-36 MB of its 57 MB binary resident, where its
// steady work needs a few (BENCHMARKS.md, "Resident memory of an idle
// server").
//
// Only private read-only mappings of the executable's own file (its device
// and inode, not just its name) with no anonymous (copied) pages, resident
// or swapped out, are advised: MADV_DONTNEED on them loses nothing, as
// their contents are the file's. A mapping where the dynamic loader wrote
// a page (RELRO, in a cgo build) is skipped.
//
// MADV_DONTNEED makes the next touch read the file again, so the file must
// still hold what the process was started from. Linux refuses writes to a
// running executable (ETXTBSY), and a rebuild that replaces the file by a
// new one (go build, install, a rename) leaves the process's mappings on
// the old inode; but a file rewritten in place where that refusal does not
// reach (a file system shared with another machine, a host's bind mount
// into a container) would page new code into the running server. So
// the file's identity, size and modification time are taken when the
// server starts, and if they differ later nothing is released, then or
// after. Its change time is not compared: a hard link moves it without
// touching a byte (perf record links every binary it profiles into its
// build-id cache, ~/.debug), and so do chmod and chown.
type binaryPages struct {
	start   binaryFile
	changed atomic.Bool
	stat    func() (binaryFile, error) // statBinary; a test changes it
}

// binaryFile is what identifies the executable's file and its contents.
type binaryFile struct {
	major, minor uint32
	ino          uint64
	size         int64
	mtime        syscall.Timespec
}

// statBinary reads the identity of the file the process executes
// (/proc/self/exe leads to it even when it has been deleted or replaced).
func statBinary() (binaryFile, error) {
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/self/exe", &st); err != nil {
		return binaryFile{}, fmt.Errorf("release binary pages: %w", err)
	}
	return binaryFile{
		major: unix.Major(uint64(st.Dev)), minor: unix.Minor(uint64(st.Dev)), ino: st.Ino,
		size: st.Size, mtime: st.Mtim,
	}, nil
}

// newBinaryPages takes the executable's identity now, for the releases that
// follow. Call it as early as possible after the process starts.
func newBinaryPages() (*binaryPages, error) {
	f, err := statBinary()
	if err != nil {
		return nil, err
	}
	return &binaryPages{start: f, stat: statBinary}, nil
}

// release advises the executable's read-only mappings away and returns how
// many bytes of mappings it advised, or errBinaryChanged (once; nothing
// after) if the file is not the one the server started from. A nil
// binaryPages releases nothing.
func (b *binaryPages) release() (int64, error) {
	if b == nil || b.changed.Load() {
		return 0, nil
	}
	now, err := b.stat()
	if err != nil {
		return 0, err
	}
	if now != b.start {
		if b.changed.CompareAndSwap(false, true) {
			return 0, errBinaryChanged
		}
		return 0, nil
	}
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, fmt.Errorf("release binary pages: %w", err)
	}
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return 0, fmt.Errorf("release binary pages: %w", err)
	}
	var released int64
	for _, m := range binaryMappings(smaps, exe, now) {
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
// hold no anonymous page, resident or swapped. A mapping's device and inode must be file's: a
// name alone may be another file's.
func binaryMappings(smaps []byte, path string, file binaryFile) []mapping {
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
			if name == path && len(perms) == 4 && perms[1] == '-' && perms[3] == 'p' && sameFile(f[3], f[4], file) {
				cur, candidate = mapping{uintptr(l), uintptr(h)}, true
			}
			continue
		}
		if candidate && len(f) >= 2 && (f[0] == "Anonymous:" || f[0] == "Swap:") && f[1] != "0" {
			// A page was copied on write (a relocation the dynamic loader
			// made before it made the mapping read-only, a debugger's
			// breakpoint): its contents are not the file's. Anonymous
			// counts such pages resident, Swap those swapped out.
			candidate = false
		}
	}
	flush()
	return out
}

// sameFile reports whether an smaps header's device (hex major:minor) and
// inode (decimal) are file's.
func sameFile(dev, inode string, file binaryFile) bool {
	maj, min, ok := strings.Cut(dev, ":")
	if !ok {
		return false
	}
	ma, err1 := strconv.ParseUint(maj, 16, 32)
	mi, err2 := strconv.ParseUint(min, 16, 32)
	ino, err3 := strconv.ParseUint(inode, 10, 64)
	return err1 == nil && err2 == nil && err3 == nil && uint32(ma) == file.major && uint32(mi) == file.minor && ino == file.ino
}
