package engine

import (
	"io/fs"
	"path/filepath"
)

// DiskUsage returns the bytes of the bucket's files on disk: disk is every
// file in its folder (its store, and the view and search indexes kept
// beside it), data is the same less the pebble store's full-disk reserve
// (a file of zeros held back, not data). Both are 0 for a bucket that keeps
// nothing on disk. Files removed while it counts (a compaction's) are
// skipped; it reads the folder each call, a directory walk.
func (b *Bucket) DiskUsage() (disk, data int64) {
	if b.dir == "" {
		return 0, 0
	}
	_ = filepath.WalkDir(b.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil // a file or folder gone meanwhile: count the rest
		}
		info, err := d.Info()
		if err != nil || !info.Mode().IsRegular() {
			return nil
		}
		disk += info.Size()
		if d.Name() != pebbleReserveFile {
			data += info.Size()
		}
		return nil
	})
	return disk, data
}
