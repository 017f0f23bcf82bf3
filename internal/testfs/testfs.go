// Package testfs gives tests a real, small file system to fill: a tmpfs
// mounted for the test's duration, so that a full disk is tested as a user
// meets it (ENOSPC from the kernel), not simulated.
package testfs

import (
	"fmt"
	"os/exec"
	"testing"
)

// MountSmall mounts a tmpfs of size bytes on a new temporary folder, which
// it returns, and unmounts it when the test ends. It skips the test where
// mounting is not allowed (not root); CI runs as root.
func MountSmall(t testing.TB, size int) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir).CombinedOutput()
	if err != nil {
		t.Skipf("cannot mount a small file system here (needs root): %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}
