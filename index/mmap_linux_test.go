package index_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/index"
	"github.com/mayflydb/mayfly/internal/racebuild"
)

// mappedRSS returns the resident bytes of this process's mappings of path
// (/proc/self/smaps), and whether it is mapped at all.
func mappedRSS(t *testing.T, path string) (int64, bool) {
	t.Helper()
	rss, found, err := smapsRSS(path)
	if err != nil {
		t.Skipf("no smaps: %v", err)
	}
	return rss, found
}

// TestPagedMapReleaseFreesResident: the pages of a paged index's file that
// its reads mapped into the process count in its resident memory until a
// release gives them back; the index answers the same after it.
func TestPagedMapReleaseFreesResident(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.view")
	ix := openIndex(t, index.Config{Path: path, Signature: "s", NumPartitions: 4,
		Views: []index.ViewConfig{{Name: "v", Reducer: &countSum{}}}, Cache: index.NewPageCache(8 << 10)})
	defer closeIndex(t, ix)
	const docs = 20000
	var ups []index.DocUpdate
	for i := range docs {
		ups = append(ups, index.DocUpdate{DocID: fmt.Sprintf("d%06d", i), Seq: uint64(i + 1),
			Rows: map[string][]index.Emit{"v": emits(strconv.Itoa(i), strconv.Itoa(i%7))}})
	}
	apply(t, ix, ups...)
	if err := ix.WriteBack(); err != nil {
		t.Fatal(err)
	}
	all := rowsOf(t, ix, "v", index.Range{}) // every leaf, through the map (the cache holds one or two)
	if len(all) != docs {
		t.Fatalf("%d rows, want %d", len(all), docs)
	}
	before, mapped := mappedRSS(t, path)
	if !mapped {
		t.Fatalf("%s is not mapped", path)
	}
	if before < 256<<10 {
		t.Fatalf("reading every leaf left %d bytes of the file resident; want the leaves' pages", before)
	}
	index.ReleaseMapped(ix)
	after, _ := mappedRSS(t, path)
	if after > 16<<10 { // bbolt's meta pages, read to begin a transaction
		t.Fatalf("after a release %d bytes of the file stay resident (%d before)", after, before)
	}
	if n, err := index.MapReleases(ix); n == 0 || err != nil {
		t.Fatalf("releases %d, error %v", n, err)
	}
	equalStrings(t, "rows after the release", rowsOf(t, ix, "v", index.Range{}), all)
	checkIndex(t, ix)
}

// TestPagedMapSparseReadsStayBounded: queries spread thin over a large
// index each read a small leaf in another 64 KiB of the file, and Linux
// maps the 64 KiB around each read (fault-around): the file's resident map
// stays within about the page cache's budget all the same.
func TestPagedMapSparseReadsStayBounded(t *testing.T) {
	racebuild.Skip(t)
	path := filepath.Join(t.TempDir(), "p.view")
	const budget = 4 << 20
	// Leaves of 8 rows of 100-byte document ids: pages of about 1 KiB.
	ix := openIndex(t, index.WithPagedLeafRows(index.Config{Path: path, Signature: "s", NumPartitions: 4,
		Views: []index.ViewConfig{{Name: "v"}}, Cache: index.NewPageCache(budget)}, 8))
	defer closeIndex(t, ix)
	const docs = 100000 // about 13 MiB of leaves
	pad := strings.Repeat("x", 90)
	ups := make([]index.DocUpdate, 0, docs)
	for i := range docs {
		ups = append(ups, index.DocUpdate{DocID: fmt.Sprintf("d%06d-%s", i, pad), Seq: uint64(i + 1),
			Rows: map[string][]index.Emit{"v": emits(strconv.Itoa(i), "1")}})
	}
	apply(t, ix, ups...)
	if err := ix.WriteBack(); err != nil {
		t.Fatal(err)
	}
	index.ReleaseMapped(ix)
	// A query of one row in each 500 rows (about 64 KiB of leaves).
	const queries = docs / 500
	for q := range queries {
		n := 0
		err := ix.Query(context.Background(), "v", index.Range{StartKey: []byte(strconv.Itoa(q * 500))}, func(index.Row) error {
			n++
			return index.ErrStop
		})
		if err != nil || n != 1 {
			t.Fatalf("query %d: %d rows, %v", q, n, err)
		}
	}
	rss, mapped := mappedRSS(t, path)
	if !mapped {
		t.Fatalf("%s is not mapped", path)
	}
	t.Logf("%d sparse queries: %d KiB of the file resident", queries, rss>>10)
	if rss > 2*budget { // the budget, and the pages a query's lookup crossed
		t.Fatalf("after %d sparse queries %d KiB of the file stay resident; want about %d KiB at most", queries, rss>>10, budget>>10)
	}
	checkIndex(t, ix)
}
