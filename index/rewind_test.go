package index_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/index"
)

// Rewinding partitions removes every row of their documents and sets their
// sequence numbers to 0, keeping the other partitions' rows and sequence
// numbers: the index then answers (rows, total_rows, reductions) as one
// built from the other partitions' documents only, passes Check, and so
// does it reopened (in memory, in a file, paged with some of the back index
// written back and some of it in memory).
func TestRewindPartitions(t *testing.T) {
	ctx := context.Background()
	const n, nparts = 600, 4
	partOf := func(id string) int {
		i, err := strconv.Atoi(strings.TrimPrefix(id, "d"))
		if err != nil {
			t.Fatalf("document id %q", id)
		}
		return i % nparts
	}
	update := func(i, round int) index.DocUpdate {
		id := fmt.Sprintf("d%04d", i)
		u := index.DocUpdate{DocID: id, Partition: uint16(partOf(id)), Seq: uint64(1 + i/nparts + round*n), Rows: map[string][]index.Emit{}}
		if i%7 != 0 { // a document with no rows now and then
			u.Rows["v"] = emits(strconv.Itoa(i%50), strconv.Itoa(i+round))
		}
		if i%11 == 0 {
			u.Expiration = 1_700_000_000 + int64(i)
		}
		return u
	}
	views := func() []index.ViewConfig { return []index.ViewConfig{{Name: "v", Reducer: &countSum{}}} }
	for _, kind := range []string{"memory", "file", "paged"} {
		t.Run(kind, func(t *testing.T) {
			cfg := index.Config{Signature: "s", NumPartitions: nparts, Views: views()}
			if kind != "memory" {
				cfg.Path = filepath.Join(t.TempDir(), "x.view")
			}
			if kind == "paged" {
				cfg.Cache = index.NewPageCache(8 << 10)
				cfg = index.WithPagedLeafRows(cfg, 16)
			}
			ix := openIndex(t, cfg)
			var all []index.DocUpdate
			for i := range n {
				all = append(all, update(i, 0))
			}
			apply(t, ix, all[:n/2]...)
			if err := ix.WriteBack(); err != nil {
				t.Fatal(err)
			}
			apply(t, ix, all[n/2:]...)
			apply(t, ix, update(3, 1), update(14, 1)) // 14: no rows any more
			before := ix.Seqs()
			beforeRows := rowsOf(t, ix, "v", index.Range{})
			crashed := func(name string) string { // a kill -9 now: the file as it is
				if cfg.Path == "" {
					return ""
				}
				path := filepath.Join(t.TempDir(), name)
				if err := index.CopyFile(ix, path); err != nil {
					t.Fatal(err)
				}
				return path
			}
			crashBefore := crashed("before")
			durable := false
			if err := ix.Rewind(ctx, []int{1, 3}, partOf, func() { durable = true }); err != nil {
				t.Fatal(err)
			}
			if !durable {
				t.Error("durable was not called")
			}
			// The reference: the kept partitions' documents only.
			ref := openIndex(t, index.Config{Signature: "s", NumPartitions: nparts, Views: views()})
			var kept []index.DocUpdate
			for _, u := range all {
				if u.Partition == 0 || u.Partition == 2 {
					kept = append(kept, u)
				}
			}
			apply(t, ref, kept...)
			want := slices.Clone(before)
			want[1], want[3] = 0, 0
			same := func(when string) {
				t.Helper()
				if got := ix.Seqs(); !slices.Equal(got, want) {
					t.Errorf("%s: seqs %v, want %v", when, got, want)
				}
				equalStrings(t, when+": rows", rowsOf(t, ix, "v", index.Range{}), rowsOf(t, ref, "v", index.Range{}))
				equalStrings(t, when+": reduce", reduced(t, ix, "v", index.Range{}, index.Grouping{}), reduced(t, ref, "v", index.Range{}, index.Grouping{}))
				equalStrings(t, when+": grouped", reduced(t, ix, "v", index.Range{}, index.Grouping{Exact: true}), reduced(t, ref, "v", index.Range{}, index.Grouping{Exact: true}))
				got, _ := ix.TotalRows("v")
				exp, _ := ref.TotalRows("v")
				if got != exp || got == 0 {
					t.Errorf("%s: total_rows %d, want %d", when, got, exp)
				}
				checkIndex(t, ix)
			}
			crashAfter := crashed("after")
			same("rewound")
			rewoundRows := rowsOf(t, ix, "v", index.Range{})
			rewoundSeqs := slices.Clone(want)
			// The partitions come again from 0.
			again := update(1, 2)
			again.Seq = 1
			apply(t, ix, again)
			apply(t, ref, again)
			want[1] = 1
			same("partition 1 again")
			if cfg.Path == "" {
				return
			}
			closeIndex(t, ix)
			// A crash leaves the index before the rewind or after it.
			ccfg := cfg
			ccfg.Path = crashBefore
			c := openIndex(t, ccfg)
			if got := c.Seqs(); !slices.Equal(got, before) {
				t.Errorf("crashed before the rewind: seqs %v, want %v", got, before)
			}
			equalStrings(t, "crashed before the rewind: rows", rowsOf(t, c, "v", index.Range{}), beforeRows)
			checkIndex(t, c)
			ccfg.Path = crashAfter
			ix = openIndex(t, ccfg)
			if got := ix.Seqs(); !slices.Equal(got, rewoundSeqs) {
				t.Errorf("crashed after the rewind: seqs %v, want %v", got, rewoundSeqs)
			}
			equalStrings(t, "crashed after the rewind: rows", rowsOf(t, ix, "v", index.Range{}), rewoundRows)
			checkIndex(t, ix)
			apply(t, ix, again)
			same("crashed after the rewind, partition 1 again")
			ix = openIndex(t, cfg)
			same("reopened")
			if err := ix.Rewind(ctx, []int{nparts}, partOf, nil); err == nil {
				t.Error("a partition out of range was accepted")
			}
		})
	}
}
