package engine_test

import (
	"context"
	"errors"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// Bug (review19): reading an expired document whose value was ejected reads
// the value from disk first (ep_bg_fetched counts it; the memcached port's
// event loop is told to wait for the disk, GetResident's ErrWouldBlock) and
// only then finds it expired. The expiration is in the metadata memory keeps
// (README: "keys and metadata stay, so expiry ... work unchanged"), so the
// answer, not found, needs no disk read; Couchbase's get checks the
// expiry in the hash table before any background fetch.
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
