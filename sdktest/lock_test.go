package sdktest

import (
	"errors"
	"testing"
	"time"

	"github.com/couchbase/gocb/v2"
)

// TestGetAndLock: gocb's GetAndLock, a Replace with the lock CAS, an Upsert
// without it (ErrDocumentLocked), Unlock with a wrong and the right CAS.
func TestGetAndLock(t *testing.T) {
	s := start(t)
	_, coll := s.connect(t, user, password)
	if _, err := coll.Upsert("h1", hotel{"Ritz", 5}, nil); err != nil {
		t.Fatal(err)
	}
	locked, err := coll.GetAndLock("h1", 10*time.Second, nil)
	if err != nil {
		t.Fatalf("GetAndLock: %v", err)
	}
	var h hotel
	if err := locked.Content(&h); err != nil || h != (hotel{"Ritz", 5}) {
		t.Fatalf("GetAndLock content: %+v %v", h, err)
	}
	// A write without the lock CAS: LOCKED. gocb retries a locked
	// document until its timeout unless told not to, as against Couchbase.
	failFast := noLockedRetry{}
	if _, err := coll.Upsert("h1", hotel{"Savoy", 4}, &gocb.UpsertOptions{RetryStrategy: failFast}); !errors.Is(err, gocb.ErrDocumentLocked) {
		t.Fatalf("Upsert of a locked document: %v, want ErrDocumentLocked", err)
	}
	if _, err := coll.GetAndLock("h1", time.Second, &gocb.GetAndLockOptions{RetryStrategy: failFast}); !errors.Is(err, gocb.ErrDocumentLocked) {
		t.Fatalf("second GetAndLock: %v, want ErrDocumentLocked", err)
	}
	got, err := coll.Get("h1", nil)
	if err != nil || got.Cas() != gocb.Cas(0xffffffffffffffff) {
		t.Fatalf("Get of a locked document: cas %x, %v", uint64(got.Cas()), err)
	}
	res, err := coll.Replace("h1", hotel{"Ritz", 4}, &gocb.ReplaceOptions{Cas: locked.Cas()})
	if err != nil {
		t.Fatalf("Replace with the lock CAS: %v", err)
	}
	if _, err := coll.Upsert("h1", hotel{"Ritz", 3}, nil); err != nil {
		t.Fatalf("Upsert after the holder's Replace: %v", err)
	}

	// Unlock: a wrong CAS is refused (gocb reports it as a CAS mismatch),
	// the right one frees the document; once free, ErrDocumentNotLocked.
	locked, err = coll.GetAndLock("h1", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := coll.Unlock("h1", res.Cas(), &gocb.UnlockOptions{RetryStrategy: failFast}); err == nil {
		t.Fatal("Unlock with a wrong CAS succeeded")
	}
	if err := coll.Unlock("h1", locked.Cas(), nil); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if err := coll.Unlock("h1", locked.Cas(), nil); !errors.Is(err, gocb.ErrDocumentNotLocked) {
		t.Fatalf("Unlock of an unlocked document: %v, want ErrDocumentNotLocked", err)
	}
	if _, err := coll.Upsert("h1", hotel{"Ritz", 2}, nil); err != nil {
		t.Fatalf("Upsert after Unlock: %v", err)
	}
}

// noLockedRetry reports a LOCKED answer at once instead of retrying until
// the operation's timeout, as gocb's default strategy does.
type noLockedRetry struct{}

func (noLockedRetry) RetryAfter(_ gocb.RetryRequest, reason gocb.RetryReason) gocb.RetryAction {
	if reason.Description() == "KV_LOCKED" {
		return &gocb.NoRetryRetryAction{}
	}
	return &gocb.WithDurationRetryAction{WithDuration: 20 * time.Millisecond}
}
