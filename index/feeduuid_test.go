package index_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/mayflydb/mayfly/index"
)

// TestFeedUUID: 0 for a new index; SetFeedUUID is durable across reopens
// (with the rows, whether in the log or a checkpoint); a file whose stored
// signature differs is emptied, feed UUID included; a memory-only index keeps
// it in memory; a closed index refuses it.
func TestFeedUUID(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ddoc.view")
	ix := openIndex(t, persistConfig(path, "sig1"))
	if u := ix.FeedUUID(); u != 0 {
		t.Fatalf("new index: FeedUUID %d, want 0", u)
	}
	if err := ix.SetFeedUUID(0xfeed0001); err != nil {
		t.Fatal(err)
	}
	apply(t, ix, index.DocUpdate{DocID: "a", Partition: 2, Seq: 5, Rows: map[string][]index.Emit{"v": emits(`1`, `1`)}})
	if u := ix.FeedUUID(); u != 0xfeed0001 {
		t.Fatalf("FeedUUID %x after SetFeedUUID(feed0001)", u)
	}
	closeIndex(t, ix)

	ix = openIndex(t, persistConfig(path, "sig1"))
	if u := ix.FeedUUID(); u != 0xfeed0001 {
		t.Fatalf("reopened: FeedUUID %x, want feed0001", u)
	}
	// A new history: set again, then checkpoint at Close.
	if err := ix.SetFeedUUID(0xfeed0002); err != nil {
		t.Fatal(err)
	}
	index.SetCheckpointDocs(ix, 1)
	closeIndex(t, ix)
	ix = openIndex(t, persistConfig(path, "sig1"))
	if u := ix.FeedUUID(); u != 0xfeed0002 {
		t.Fatalf("reopened after a checkpoint: FeedUUID %x, want feed0002", u)
	}
	equalStrings(t, "rows kept with the feed UUID", rowsOf(t, ix, "v", index.Range{}), []string{`1 a 1`})
	closeIndex(t, ix)

	// Another signature: rows, sequence numbers and feed UUID are dropped,
	// in the file too.
	for range 2 {
		ix = openIndex(t, persistConfig(path, "sig2"))
		if u := ix.FeedUUID(); u != 0 {
			t.Fatalf("signature changed: FeedUUID %x, want 0", u)
		}
		if n, _ := ix.TotalRows("v"); n != 0 || ix.Seqs()[2] != 0 {
			t.Fatalf("signature changed: %d rows, seqs %v kept", n, ix.Seqs())
		}
		closeIndex(t, ix)
	}
	// And going back to the first signature does not bring it back.
	ix = openIndex(t, persistConfig(path, "sig1"))
	if u := ix.FeedUUID(); u != 0 {
		t.Fatalf("back to the first signature: FeedUUID %x, want 0", u)
	}
	closeIndex(t, ix)
	if err := ix.SetFeedUUID(1); !errors.Is(err, index.ErrClosed) {
		t.Errorf("SetFeedUUID after Close = %v, want ErrClosed", err)
	}

	mem := openIndex(t, index.Config{Views: []index.ViewConfig{{Name: "v"}}})
	if u := mem.FeedUUID(); u != 0 {
		t.Fatalf("new memory index: FeedUUID %d", u)
	}
	if err := mem.SetFeedUUID(42); err != nil || mem.FeedUUID() != 42 {
		t.Fatalf("memory index: SetFeedUUID(42) = %v, FeedUUID %d", err, mem.FeedUUID())
	}
}

// TestNoSync: Config.NoSync reaches bbolt, fsync stays on by default, and an
// index without fsync persists across a clean Close like any other.
func TestNoSync(t *testing.T) {
	for _, noSync := range []bool{false, true} {
		cfg := persistConfig(filepath.Join(t.TempDir(), "ddoc.view"), "sig")
		cfg.NoSync = noSync
		ix := openIndex(t, cfg)
		if got := index.FileNoSync(ix); got != noSync {
			t.Fatalf("Config.NoSync %v: file opened with NoSync %v", noSync, got)
		}
		apply(t, ix, index.DocUpdate{DocID: "a", Seq: 3, Rows: map[string][]index.Emit{"v": emits(`1`, `2`)}})
		closeIndex(t, ix)
		ix = openIndex(t, cfg)
		equalStrings(t, "rows after reopen", rowsOf(t, ix, "v", index.Range{}), []string{`1 a 2`})
	}
	if got := index.FileNoSync(openIndex(t, persistConfig(filepath.Join(t.TempDir(), "x"), "sig"))); got {
		t.Error("the zero Config opens the file without fsync")
	}
}

// TestMappedSurvivesReopen: Mapped counts the updates with rows (not
// deletions), is stored with them (log and checkpoint alike), and starts
// again at 0 when the rows are discarded.
func TestMappedSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ddoc.view")
	ix := openIndex(t, persistConfig(path, "sig1"))
	apply(t, ix,
		index.DocUpdate{DocID: "a", Partition: 0, Seq: 1, Rows: map[string][]index.Emit{"v": emits(`1`, `1`)}},
		index.DocUpdate{DocID: "b", Partition: 1, Seq: 1, Rows: map[string][]index.Emit{}}, // mapped, no rows
	)
	apply(t, ix, index.DocUpdate{DocID: "b", Partition: 1, Seq: 2}) // deleted: not mapped
	if n := ix.Mapped(); n != 2 {
		t.Fatalf("Mapped %d, want 2", n)
	}
	closeIndex(t, ix)
	ix = openIndex(t, persistConfig(path, "sig1"))
	if n := ix.Mapped(); n != 2 {
		t.Fatalf("reopened (log): Mapped %d, want 2", n)
	}
	apply(t, ix, index.DocUpdate{DocID: "c", Partition: 2, Seq: 1, Rows: map[string][]index.Emit{"v": emits(`2`, `2`)}})
	index.SetCheckpointDocs(ix, 1)
	closeIndex(t, ix)
	ix = openIndex(t, persistConfig(path, "sig1"))
	if n := ix.Mapped(); n != 3 {
		t.Fatalf("reopened (checkpoint): Mapped %d, want 3", n)
	}
	closeIndex(t, ix)
	ix = openIndex(t, persistConfig(path, "sig2"))
	if n := ix.Mapped(); n != 0 {
		t.Fatalf("signature changed: Mapped %d, want 0", n)
	}
	closeIndex(t, ix)
}
