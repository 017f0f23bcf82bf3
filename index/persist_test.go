package index_test

import (
	"fmt"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/mayflydb/mayfly/index"
)

func persistConfig(path, signature string) index.Config {
	return index.Config{
		Path:          path,
		Signature:     signature,
		NumPartitions: 8,
		Views:         []index.ViewConfig{{Name: "v", Reducer: &countSum{}}, {Name: "w"}},
	}
}

// dump returns every row of both views and the sequence vector.
func dump(t *testing.T, ix *index.Index) string {
	t.Helper()
	return fmt.Sprint(rowsOf(t, ix, "v", index.Range{}), rowsOf(t, ix, "w", index.Range{}), ix.Seqs())
}

// TestReopen checks that a reopened index has the same rows, reductions and
// sequence numbers, whether they came from the checkpoint, the log or both,
// and that its back index still finds the rows of each document.
func TestReopen(t *testing.T) {
	for _, tc := range []struct {
		name           string
		checkpointDocs int
	}{
		{"log only", 1 << 30},
		{"checkpoints and log", 500},
		{"checkpoint every Apply", 1},
		{"checkpoint at Close", -1},
	} {
		t.Run(tc.name, func(t *testing.T) { testReopen(t, tc.checkpointDocs) })
	}
}

func testReopen(t *testing.T, checkpointDocs int) {
	path := filepath.Join(t.TempDir(), "ddoc.view")
	ix := openIndex(t, persistConfig(path, "sig1"))
	atClose := checkpointDocs < 0
	if atClose {
		checkpointDocs = 1 << 30
	}
	index.SetCheckpointDocs(ix, checkpointDocs)
	for b := range 5 {
		var ups []index.DocUpdate
		for i := range 300 {
			id := fmt.Sprintf("doc%03d", (i*7+b*13)%400)
			u := index.DocUpdate{DocID: id, Partition: uint16(i % 8), Seq: uint64(100*b + i)}
			switch i % 10 {
			case 0:
				// deleted
			case 1:
				u.Rows = map[string][]index.Emit{} // no rows
			default:
				u.Rows = map[string][]index.Emit{
					"v": emits(fmt.Sprintf(`[%d,"%s"]`, i%5, id), fmt.Sprint(b), fmt.Sprintf(`[%d,"%s"]`, i%5, id), "1"),
					"w": emits(fmt.Sprintf(`"%s\u0000x"`, id), `{"b":`+fmt.Sprint(b)+`}`),
				}
			}
			ups = append(ups, u)
		}
		apply(t, ix, ups...)
	}
	before := dump(t, ix)
	beforeReduce := reduced(t, ix, "v", index.Range{}, index.Grouping{Level: 1})
	if atClose {
		index.SetCheckpointDocs(ix, 1)
	}
	closeIndex(t, ix)

	ix = openIndex(t, persistConfig(path, "sig1"))
	index.SetCheckpointDocs(ix, checkpointDocs)
	if after := dump(t, ix); after != before {
		t.Fatalf("reopened index differs:\nbefore %s\nafter  %s", before, after)
	}
	equalStrings(t, "reduce after reopen", reduced(t, ix, "v", index.Range{}, index.Grouping{Level: 1}), beforeReduce)

	// The back index came back too: replacing and deleting documents after the
	// reopen removes their old rows.
	var ups []index.DocUpdate
	for i := range 400 {
		id := fmt.Sprintf("doc%03d", i)
		if i%2 == 0 {
			ups = append(ups, index.DocUpdate{DocID: id, Seq: 1000, Rows: nil})
		} else {
			ups = append(ups, index.DocUpdate{DocID: id, Seq: 1000, Rows: map[string][]index.Emit{"v": emits(`1`, `1`)}})
		}
	}
	apply(t, ix, ups...)
	if n, _ := ix.TotalRows("v"); n != 200 {
		t.Errorf("after rewriting every document: %d rows in v, want 200", n)
	}
	if n, _ := ix.TotalRows("w"); n != 0 {
		t.Errorf("after rewriting every document: %d rows in w, want 0", n)
	}
	after := dump(t, ix)
	closeIndex(t, ix)
	ix = openIndex(t, persistConfig(path, "sig1"))
	if again := dump(t, ix); again != after {
		t.Fatalf("second reopen differs:\nbefore %s\nafter  %s", after, again)
	}
}

func TestReopen_ConfigChangeDiscards(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ddoc.view")
	ix := openIndex(t, persistConfig(path, "sig1"))
	apply(t, ix, index.DocUpdate{DocID: "a", Partition: 3, Seq: 7, Rows: map[string][]index.Emit{"v": emits(`1`, `1`)}})
	closeIndex(t, ix)

	for _, tc := range []struct {
		name   string
		change func(*index.Config)
	}{
		{"signature", func(c *index.Config) { c.Signature = "sig2" }},
		{"views", func(c *index.Config) { c.Views = c.Views[:1] }},
		{"partitions", func(c *index.Config) { c.NumPartitions = 16 }},
	} {
		cfg := persistConfig(path, "sig1")
		tc.change(&cfg)
		ix := openIndex(t, cfg)
		if n, _ := ix.TotalRows("v"); n != 0 {
			t.Errorf("%s changed: %d rows kept, want 0", tc.name, n)
		}
		for p, s := range ix.Seqs() {
			if s != 0 {
				t.Errorf("%s changed: partition %d at seq %d, want 0", tc.name, p, s)
			}
		}
		if len(ix.Seqs()) != cfg.NumPartitions {
			t.Errorf("%s changed: %d seqs, want %d", tc.name, len(ix.Seqs()), cfg.NumPartitions)
		}
		// Write under the new config, then go back to the original one: the
		// file now holds the new config's (empty or new) rows.
		apply(t, ix, index.DocUpdate{DocID: "b", Seq: 1, Rows: map[string][]index.Emit{"v": emits(`2`, `1`)}})
		closeIndex(t, ix)
		ix = openIndex(t, cfg)
		equalStrings(t, tc.name+": rows under the new config", rowsOf(t, ix, "v", index.Range{}), []string{`2 b 1`})
		closeIndex(t, ix)
	}
}

// TestReopen_UnfinishedCheckpoint: a checkpoint interrupted before its
// switch (the process stopped while a background checkpoint was writing)
// leaves the old checkpoint and the whole log, which Open uses, and the
// half-written rows, which Open drops.
func TestReopen_UnfinishedCheckpoint(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ddoc.view")
	ix := openIndex(t, persistConfig(path, "sig1"))
	index.SetCheckpointDocs(ix, 1)
	for b := range 3 {
		apply(t, ix, index.DocUpdate{DocID: fmt.Sprint("d", b), Seq: uint64(b + 1), Rows: map[string][]index.Emit{"v": emits(fmt.Sprint(b), "1")}})
	}
	before := dump(t, ix)
	closeIndex(t, ix)
	// Fake what a stopped background checkpoint leaves: rows in the other
	// checkpoint's bucket.
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		cur := tx.Bucket([]byte("meta")).Get([]byte("checkpoint"))
		other := byte('a')
		if len(cur) == 1 && cur[0] == 'a' {
			other = 'b'
		}
		b, err := tx.CreateBucketIfNotExists(append([]byte("rows/"+string(other)+"/"), "v"...))
		if err != nil {
			return err
		}
		return b.Put([]byte("garbage"), []byte("not a block"))
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	ix = openIndex(t, persistConfig(path, "sig1"))
	if after := dump(t, ix); after != before {
		t.Fatalf("after an unfinished checkpoint:\nbefore %s\nafter  %s", before, after)
	}
	apply(t, ix, index.DocUpdate{DocID: "d9", Seq: 10, Rows: map[string][]index.Emit{"v": emits("9", "1")}})
	want := dump(t, ix)
	closeIndex(t, ix)
	ix = openIndex(t, persistConfig(path, "sig1"))
	if got := dump(t, ix); got != want {
		t.Fatalf("after a checkpoint over the unfinished one:\nwant %s\ngot  %s", want, got)
	}
}
