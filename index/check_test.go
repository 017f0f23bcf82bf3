package index_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/index"
)

// TestCheck_DetectsCorruption damages an index in memory or in its file in
// one way at a time, and expects Check, which passed before, to name it.
func TestCheck_DetectsCorruption(t *testing.T) {
	for _, tc := range []struct {
		name    string
		corrupt func(t *testing.T, ix *index.Index)
		want    string // in Check's message
	}{
		{"cached reduction", func(t *testing.T, ix *index.Index) {
			index.CorruptReduction(ix, "v", []byte(`[1,2]`))
		}, "caches reduction [1,2], recomputed [300,"},
		{"cached reduction that does not reduce", func(t *testing.T, ix *index.Index) {
			index.CorruptReduction(ix, "v", []byte(`"x"`))
		}, `caches reduction "x"`},
		{"node count", func(t *testing.T, ix *index.Index) { index.CorruptCount(ix, "v") }, "counts 301 rows, holds 300"},
		{"row order", func(t *testing.T, ix *index.Index) { index.CorruptOrder(ix, "w") }, "not above row"},
		{"back index missing an entry", func(t *testing.T, ix *index.Index) {
			index.CorruptBackIndex(ix, "doc007")
		}, `row "`},
		{"back index listing a row no tree has", func(t *testing.T, ix *index.Index) {
			index.CorruptBackIndexAdd(ix, "ghost", "v", []byte(`"boo"`))
		}, `back index lists row`},
		{"feed UUID differs from the file's", func(t *testing.T, ix *index.Index) {
			index.CorruptFeedUUID(ix, 77)
		}, "file: feed UUID 5, memory 77"},
		{"sequence vector differs from the file's", func(t *testing.T, ix *index.Index) {
			if err := index.CorruptFileSeqs(ix, 9); err != nil {
				t.Fatal(err)
			}
		}, "file: sequence vector"},
		{"file holds a row memory has not", func(t *testing.T, ix *index.Index) {
			if err := index.CorruptFileLog(ix, "ghost", "w", []byte(`"boo"`)); err != nil {
				t.Fatal(err)
			}
		}, `file: view "w"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := persistConfig(filepath.Join(t.TempDir(), "ix"), "sig")
			ix, err := index.Open(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			// Not openIndex: Check is meant to fail at the end.
			t.Cleanup(func() { ix.Close() })
			var ups []index.DocUpdate
			for i := range 150 {
				ups = append(ups, index.DocUpdate{DocID: fmt.Sprintf("doc%03d", i), Partition: uint16(i % 8), Seq: uint64(i + 1),
					Rows: map[string][]index.Emit{"v": emits(fmt.Sprint(i%10), "1", fmt.Sprint(i%7), "2"), "w": emits(fmt.Sprintf(`"%d"`, i), "null")}})
			}
			apply(t, ix, ups...)
			if err := ix.SetFeedUUID(5); err != nil {
				t.Fatal(err)
			}
			// Cache reductions everywhere.
			reduced(t, ix, "v", index.Range{}, index.Grouping{})
			checkIndex(t, ix)
			tc.corrupt(t, ix)
			err = ix.Check(context.Background())
			if !errors.Is(err, index.ErrCheck) {
				t.Fatalf("Check after corruption = %v, want ErrCheck", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Check after corruption = %v, want a message containing %q", err, tc.want)
			}
			t.Logf("%v", err)
		})
	}
}

func TestCheck_Closed(t *testing.T) {
	ix := openIndex(t, index.Config{Views: []index.ViewConfig{{Name: "v"}}})
	closeIndex(t, ix)
	if err := ix.Check(context.Background()); !errors.Is(err, index.ErrClosed) {
		t.Errorf("Check after Close = %v, want ErrClosed", err)
	}
}
