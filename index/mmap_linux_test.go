package index_test

import (
	"fmt"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/mayflydb/mayfly/index"
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
