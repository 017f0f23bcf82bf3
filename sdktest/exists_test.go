package sdktest

import (
	"testing"
)

// gocb's Exists (GET_META) is true for a live document and false for one
// never written and for one removed: a removed document's tombstone
// answers with its metadata and the deleted flag, as Couchbase's does.
func TestExists(t *testing.T) {
	s := start(t)
	_, col := s.connect(t, adminUser, adminPassword)
	if _, err := col.Upsert("here", map[string]int{"n": 1}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := col.Upsert("gone", map[string]int{"n": 2}, nil); err != nil {
		t.Fatal(err)
	}
	removed, err := col.Remove("gone", nil)
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]bool{"here": true, "gone": false, "never": false} {
		res, err := col.Exists(key, nil)
		if err != nil {
			t.Fatalf("Exists(%s): %v", key, err)
		}
		if res.Exists() != want {
			t.Errorf("Exists(%s) = %v, want %v", key, res.Exists(), want)
		}
		if key == "gone" && res.Cas() != removed.Cas() {
			t.Errorf("Exists(gone): CAS %d, want the removal's %d", res.Cas(), removed.Cas())
		}
	}
}
