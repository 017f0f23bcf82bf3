package engine_test

import (
	"context"
	"errors"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// A read of an expired document whose value was ejected answers not found
// from memory: the expiration is in the metadata memory keeps (README: "keys
// and metadata stay, so expiry ... work unchanged"), as Couchbase's get
// checks the expiry in its hash table before any background fetch. A review
// found the value read from disk first (ep_bg_fetched counted it, and
// GetResident sent the memcached port's event loop to wait for the disk).
func TestExpiredEjectedDocumentReadsAsMissingWithoutFetch(t *testing.T) {
	ctx := context.Background()
	b := ejectBucket(t)
	clk := b.Clock().(*engine.FakeClock)
	c := b.DefaultCollection()
	const expiring = 20 // written first: their values leave memory
	for i := range ejectDocs {
		var o *engine.WriteOptions
		if i < expiring {
			o = &engine.WriteOptions{Expiry: 100}
		}
		if _, err := c.Upsert(ctx, memKey(i), ejectValue(i, 0), o); err != nil {
			t.Fatal(err)
		}
	}
	var ejected []string
	for i := range expiring {
		if _, err := c.GetResident(ctx, memKey(i)); errors.Is(err, engine.ErrWouldBlock) {
			ejected = append(ejected, memKey(i))
		}
	}
	if len(ejected) == 0 {
		t.Fatalf("none of the first %d documents' values left memory: %+v", expiring, b.Stats())
	}
	clk.Advance(200)
	before := b.Stats().BgFetched
	for _, k := range ejected[:len(ejected)/2] {
		if _, err := c.GetResident(ctx, k); !errors.Is(err, engine.ErrNotFound) {
			t.Errorf("GetResident of expired %s (value ejected): %v, want ErrNotFound from memory", k, err)
		}
	}
	for _, k := range ejected {
		if _, err := c.Get(ctx, k); !errors.Is(err, engine.ErrNotFound) {
			t.Errorf("Get of expired %s: %v, want ErrNotFound", k, err)
		}
	}
	if got := b.Stats().BgFetched; got != before {
		t.Errorf("ep_bg_fetched went from %d to %d reading %d expired documents: their values were read from disk to answer not found", before, got, len(ejected))
	}
}
