package auth

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestReleaseWithinASecondIsPutOff: a password check that ends within a
// second of the last release of argon2's memory still gives its memory back,
// once the second has passed, and two such checks give it back once.
func TestReleaseWithinASecondIsPutOff(t *testing.T) {
	s, err := Open(t.TempDir(), &Options{Argon2: &Argon2Params{Time: 1, Memory: 64, Threads: 1, KeyLen: 32}})
	if err != nil {
		t.Fatal(err)
	}
	var freed atomic.Int64
	s.freeOS = func() { freed.Add(1) }
	s.lastRelease.Store(time.Now().UnixNano()) // a release just now, as Open's hash of the administrator's password makes
	for range 2 {
		s.hashSlots <- struct{}{}
		s.releaseHash()
	}
	deadline := time.Now().Add(30 * time.Second)
	for freed.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the memory of a check within a second of the last release was never given back")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// One timer for both: a third check after it waits for the next second.
	if s.releaseDue.Load() {
		t.Fatal("a release is still due after the put-off one ran")
	}
	if n := freed.Load(); n != 1 {
		t.Fatalf("gave the memory back %d times, want 1", n)
	}
}
