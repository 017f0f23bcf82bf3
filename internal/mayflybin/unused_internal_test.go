package mayflybin

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Build directories unused for more than five days go; recent ones, and
// the one in use whatever its time, stay.
func TestRemoveUnused(t *testing.T) {
	root := t.TempDir()
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	dirs := map[string]time.Duration{"old": 6 * 24 * time.Hour, "recent": 4 * 24 * time.Hour, "inuse": 30 * 24 * time.Hour}
	for name, age := range dirs {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Join(p, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, "mayfly"), []byte("x"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, now.Add(-age), now.Add(-age)); err != nil {
			t.Fatal(err)
		}
	}
	removeUnused(root, filepath.Join(root, "inuse"), now)
	for name, want := range map[string]bool{"old": false, "recent": true, "inuse": true} {
		_, err := os.Stat(filepath.Join(root, name))
		if got := err == nil; got != want {
			t.Errorf("%s kept = %v (%v), want %v", name, got, err, want)
		}
	}
}
