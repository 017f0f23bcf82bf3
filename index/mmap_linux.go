package index

import "golang.org/x/sys/unix"

// dontNeed is madvise(MADV_DONTNEED) over n bytes mapped at addr: the
// process's mappings of a shared file map's pages are dropped, the pages
// stay in the kernel's page cache.
func dontNeed(addr uintptr, n int64) error {
	if n <= 0 {
		return nil
	}
	// The raw call, as the range is bbolt's map, known by its address.
	if _, _, errno := unix.Syscall(unix.SYS_MADVISE, addr, uintptr(n), unix.MADV_DONTNEED); errno != 0 {
		return errno
	}
	return nil
}
