package engine_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// A consumer's cursor yields what Changes returns, in batches of at most
// the limit asked, each document once at its latest version, and ends at
// the position Changes reaches; a cursor left early resumes after the last
// document yielded.
func TestConsumerCursor(t *testing.T) {
	b, _ := newBucket(t, engine.Couchbase)
	ctx := context.Background()
	c := b.DefaultCollection()
	for i := range 300 {
		if _, err := c.Upsert(ctx, fmt.Sprint("k", i), []byte(`{"v":1}`), nil); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 50 { // a second version of some: each appears once, at it
		if _, err := c.Upsert(ctx, fmt.Sprint("k", i), []byte(`{"v":2}`), nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Delete(ctx, "k299", nil); err != nil {
		t.Fatal(err)
	}
	want, wantNext, err := b.Changes(nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	h := b.Consumer("test")
	cur, err := h.Changes(nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []*engine.Document
	for {
		n := 0
		for d := range cur.Next(7) {
			got = append(got, d)
			n++
		}
		if n > 7 {
			t.Fatalf("a batch of %d, limit 7", n)
		}
		if n == 0 {
			break
		}
	}
	if len(got) != len(want) {
		t.Fatalf("cursor yielded %d documents, Changes %d", len(got), len(want))
	}
	for i := range got {
		if got[i].Key != want[i].Key || got[i].Seq != want[i].Seq || got[i].CAS != want[i].CAS {
			t.Fatalf("document %d: cursor %s@%d, Changes %s@%d", i, got[i].Key, got[i].Seq, want[i].Key, want[i].Seq)
		}
	}
	if !slices.Equal(cur.Position(), wantNext) || !slices.Equal(cur.Position(), h.HighSeqnos()) {
		t.Fatalf("cursor at %v, Changes reached %v", cur.Position(), wantNext)
	}

	// Stopped after 10: the next batch starts with the 11th.
	cur, _ = h.Changes(nil)
	i := 0
	for range cur.Next(0) {
		i++
		if i == 10 {
			break
		}
	}
	var next *engine.Document
	for d := range cur.Next(1) {
		next = d
	}
	if next == nil || next.Key != want[10].Key || next.Seq != want[10].Seq {
		t.Fatalf("after stopping at 10 the cursor resumed at %v, want %s", next, want[10].Key)
	}
	// A cursor from a position sees only what came after it.
	cur, _ = h.Changes(wantNext)
	if _, err := c.Upsert(ctx, "late", []byte(`{}`), nil); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for d := range cur.Next(0) {
		keys = append(keys, d.Key)
	}
	if !slices.Equal(keys, []string{"late"}) {
		t.Fatalf("after the position: %v", keys)
	}
	if _, err := h.Changes([]uint64{1}); err == nil {
		t.Fatal("a vector of the wrong length was accepted")
	}
}
