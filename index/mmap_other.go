//go:build !linux

package index

// dontNeed does nothing where madvise's MADV_DONTNEED is not known to
// keep a shared file map readable (see mapRelease).
func dontNeed(uintptr, int64) error { return nil }
