package sdktest

import (
	"errors"
	"testing"
	"time"

	"github.com/couchbase/gocb/v2"
)

// Bug: GetAndLock leaves the document's own CAS as it was and keeps the
// lock CAS beside it (engine/lock.go), so once the lock ends the document
// has its pre-lock CAS again. Couchbase's GET_LOCKED gives the stored
// document the new CAS ("acquire lock and increment cas value":
// VBucket::getLocked sets the stored value's CAS to the lock CAS), and it
// stays after an Unlock or after the lock times out. So against Couchbase:
//   - a worker whose processing outlasted its lock (nobody wrote meanwhile)
//     writes with the CAS GetAndLock gave it and succeeds; on Mayfly it gets
//     ErrCasMismatch and must redo its work;
//   - Get after Unlock shows the lock CAS; on Mayfly the pre-lock one;
//   - a client holding a CAS from before the lock gets ErrCasMismatch after
//     the lock (taking a lock invalidates earlier CASes); on Mayfly its
//     write goes through.
func TestLockCASOutlivesTheLock(t *testing.T) {
	s := start(t)
	_, coll := s.connect(t, user, password)

	// The lock times out (the engine clock moves past it), then its holder
	// writes with the lock CAS.
	if _, err := coll.Upsert("job", map[string]string{"state": "new"}, nil); err != nil {
		t.Fatal(err)
	}
	lk, err := coll.GetAndLock("job", 15*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.clock.Advance(20)
	if _, err := coll.Replace("job", map[string]string{"state": "done"}, &gocb.ReplaceOptions{Cas: lk.Cas()}); err != nil {
		t.Errorf("holder's Replace with the lock CAS after the lock timed out, nothing written meanwhile: %v, want success as against Couchbase", err)
	}

	// Unlock, then the CAS the document shows and a pre-lock CAS.
	if _, err := coll.Upsert("room", map[string]int{"beds": 2}, nil); err != nil {
		t.Fatal(err)
	}
	pre, err := coll.Get("room", nil)
	if err != nil {
		t.Fatal(err)
	}
	lk, err = coll.GetAndLock("room", 15*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := coll.Unlock("room", lk.Cas(), nil); err != nil {
		t.Fatal(err)
	}
	after, err := coll.Get("room", nil)
	if err != nil {
		t.Fatal(err)
	}
	if after.Cas() != lk.Cas() {
		t.Errorf("Get after Unlock: CAS %x, want the lock CAS %x (the pre-lock CAS was %x)", after.Cas(), lk.Cas(), pre.Cas())
	}
	_, err = coll.Replace("room", map[string]int{"beds": 3}, &gocb.ReplaceOptions{Cas: pre.Cas()})
	if !errors.Is(err, gocb.ErrCasMismatch) {
		t.Errorf("Replace with the CAS from before the lock, after Unlock: %v, want ErrCasMismatch", err)
	}
}
