package search_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/search"
)

// A running search index follows the drop of a partition's copy (issue
// 22): the partition's documents leave it, the others stay, and when a copy
// of the partition joins the node again from sequence number 0 the index
// holds exactly its new documents (on the old code it skipped them: their
// sequence numbers are below where it was before the drop), without a
// rebuild; after a restart it is taken as it is.
func TestDroppedPartitionLeavesRunningIndex(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, engine.Couchbase, search.Options{BatchSize: 4}) // several removal batches
	e.createIndex("i", `{}`)
	const n = 80
	key := func(i int) string { return fmt.Sprintf("d%02d", i) }
	for range 3 {
		for i := range n {
			e.put(key(i), fmt.Sprintf(`{"n":%d,"text":"old"}`, i), 0)
		}
	}
	b := e.bucket()
	part := b.PartitionOf(key(0))
	var in, kept []string
	for i := range n {
		if b.PartitionOf(key(i)) == part {
			in = append(in, key(i))
		} else {
			kept = append(kept, key(i))
		}
	}
	if len(in) < 3 {
		t.Fatalf("%d keys in partition %d; the test needs 3", len(in), part)
	}
	all := `{"query":{"match_all":{}},"sort":["_id"],"size":1000,` + atPlus + `}`
	if a := e.query("i", all); a.TotalHits != n {
		t.Fatalf("before the drop: %d hits", a.TotalHits)
	}
	if err := b.DropPartition(ctx, part); err != nil {
		t.Fatal(err)
	}
	if got := e.query("i", all).ids(); !slices.Equal(got, kept) {
		t.Errorf("after the drop: %v, want %v", got, kept)
	}
	// The copy joins again: two of its documents, at sequence numbers 1 and 2.
	e.put(in[1], `{"text":"new"}`, 0)
	e.put(in[2], `{"text":"new"}`, 0)
	want := slices.Sorted(slices.Values(append(slices.Clone(kept), in[1], in[2])))
	if got := e.query("i", all).ids(); !slices.Equal(got, want) {
		t.Errorf("after the copy joined again: %v, want %v", got, want)
	}
	if got := e.query("i", `{"query":{"match":"new","field":"text"},"sort":["_id"],`+atPlus+`}`).ids(); !slices.Equal(got, []string{in[1], in[2]}) {
		t.Errorf("the new documents: %v", got)
	}
	if err := e.svc.Check(ctx); err != nil {
		t.Error(err)
	}
	if st, err := e.svc.IndexStats(ctx, "default", "i"); err != nil || st.Rollbacks != 0 {
		t.Errorf("stats %+v, %v; want no rebuild", st, err)
	}
	e.close()
	e.opts.NoAutoUpdate = true // what a query sees is the index as opened
	e.open()
	if got := e.query("i", `{"query":{"match_all":{}},"sort":["_id"],"size":1000}`).ids(); !slices.Equal(got, want) {
		t.Errorf("after a restart: %v, want %v", got, want)
	}
	if st, err := e.svc.IndexStats(ctx, "default", "i"); err != nil || st.Rollbacks != 0 {
		t.Errorf("after a restart: %+v, %v; want no rebuild", st, err)
	}
}
