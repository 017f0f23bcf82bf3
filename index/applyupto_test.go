package index_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mayflydb/mayfly/index"
)

// TestApplyUpToAdvancesEmptyPartitions: a change-feed consumer's vector
// advances partitions that brought no update, durably.
func TestApplyUpToAdvancesEmptyPartitions(t *testing.T) {
	ctx := context.Background()
	cfg := index.Config{Path: filepath.Join(t.TempDir(), "x.idx"), Signature: "s", Views: []index.ViewConfig{{Name: "v"}}, NumPartitions: 4}
	ix := openIndex(t, cfg)
	up := []index.DocUpdate{{DocID: "a", Partition: 1, Seq: 3, Rows: map[string][]index.Emit{"v": {{Key: []byte(`1`)}}}}}
	if err := ix.ApplyUpTo(ctx, up, []uint64{7, 2, 0, 9}); err != nil {
		t.Fatal(err)
	}
	if got, want := ix.Seqs(), []uint64{7, 3, 0, 9}; !slices.Equal(got, want) {
		t.Fatalf("seqs %v, want %v", got, want)
	}
	if err := ix.ApplyUpTo(ctx, nil, []uint64{8, 0, 0, 0}); err != nil {
		t.Fatal(err)
	}
	if err := ix.ApplyUpTo(ctx, nil, []uint64{1}); err == nil {
		t.Fatal("a vector of the wrong length was accepted")
	}
	closeIndex(t, ix)
	ix = openIndex(t, cfg)
	if got, want := ix.Seqs(), []uint64{8, 3, 0, 9}; !slices.Equal(got, want) {
		t.Fatalf("after reopen seqs %v, want %v", got, want)
	}
	if n, _ := ix.TotalRows("v"); n != 1 {
		t.Fatalf("rows after reopen: %d", n)
	}
}
