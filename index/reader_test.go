package index_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mayflydb/mayfly/index"
)

// TestReaderOneSnapshot reads an index, in memory and paged, while Applies
// publish new snapshots one after another: each Reader's row count, rows,
// reduction and sequence vector must all be those of one snapshot. Every
// Apply adds one row to partition i%4 at that partition's next sequence
// number, so a snapshot of n rows has sequence numbers summing to n; an
// answer that read its row count and its rows from different snapshots
// (as total_rows and rows did before Reader) fails.
func TestReaderOneSnapshot(t *testing.T) {
	for _, paged := range []bool{false, true} {
		t.Run(map[bool]string{false: "memory", true: "paged"}[paged], func(t *testing.T) {
			cfg := index.Config{NumPartitions: 4, Views: []index.ViewConfig{{Name: "v", Reducer: &countSum{}}}}
			if paged {
				cfg.Path = filepath.Join(t.TempDir(), "r.view")
				cfg.Signature = "s"
				cfg.NoSync = true
				cfg.Cache = index.NewPageCache(8 << 10)
				cfg = index.WithPagedLeafRows(cfg, 8)
			}
			ix := openIndex(t, cfg)
			if paged {
				index.SetCheckpointDocs(ix, 16) // write back while readers read
			}
			ctx := context.Background()
			const docs = 400
			var wg sync.WaitGroup
			var reads, applied atomic.Int64
			stop := make(chan struct{})
			wg.Add(1)
			go func() { // the feed
				defer wg.Done()
				defer close(stop)
				for i := range docs {
					u := index.DocUpdate{DocID: fmt.Sprintf("d%04d", i), Partition: uint16(i % 4), Seq: uint64(i/4 + 1),
						Rows: map[string][]index.Emit{"v": emits(strconv.Itoa(i%37), "1")}}
					if err := ix.Apply(ctx, []index.DocUpdate{u}); err != nil {
						t.Errorf("Apply: %v", err)
						return
					}
					// Let a read start on this snapshot: the next Apply
					// runs during it.
					r := reads.Load()
					applied.Add(1)
					for reads.Load() == r && !t.Failed() {
						runtime.Gosched()
					}
				}
			}()
			var checked, nonEmpty int64
			var mu sync.Mutex
			for range 2 {
				wg.Add(1)
				go func() { // stale=ok queries
					defer wg.Done()
					var last int64
					for done := false; !done; {
						// Wait for an Apply since the last read, then read.
						for applied.Load() == last && !isClosed(stop) {
							runtime.Gosched()
						}
						last = applied.Load()
						select {
						case <-stop:
							done = true // one more read, of the last snapshot
						default:
						}
						reads.Add(1)
						n, seqSum, rows, reducedCount, err := readOnce(ctx, ix)
						if err != nil {
							t.Errorf("read: %v", err)
							return
						}
						if rows != n || uint64(n) != seqSum || (n > 0) != (reducedCount >= 0) || n > 0 && reducedCount != int64(n) {
							t.Errorf("one answer: total_rows %d, %d rows, sequence numbers summing to %d, reduction count %d: not one snapshot", n, rows, seqSum, reducedCount)
							return
						}
						mu.Lock()
						checked++
						if n > 0 && n < docs {
							nonEmpty++
						}
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			if n, err := ix.TotalRows("v"); err != nil || n != docs {
				t.Fatalf("TotalRows at the end = %d, %v; want %d", n, err, docs)
			}
			if nonEmpty == 0 {
				t.Fatalf("no answer read a snapshot of the build in progress (%d answers)", checked)
			}
			t.Logf("%d answers checked, %d of them during the build", checked, nonEmpty)
		})
	}
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// readOnce answers one query from one Reader: total_rows, the sum of the
// sequence vector, the rows counted and the reduction's row count (-1 for
// no reduce row, as a view without rows answers).
func readOnce(ctx context.Context, ix *index.Index) (total int, seqSum uint64, rows int, reducedCount int64, err error) {
	rd, err := ix.Reader()
	if err != nil {
		return 0, 0, 0, 0, err
	}
	defer rd.Close()
	for _, s := range rd.Seqs() {
		seqSum += s
	}
	// Yield in each row: Applies run during the read.
	if err = rd.Query(ctx, "v", index.Range{}, func(index.Row) error { rows++; runtime.Gosched(); return nil }); err != nil {
		return
	}
	if total, err = rd.TotalRows("v"); err != nil {
		return
	}
	reducedCount = -1
	err = rd.Reduce(ctx, "v", index.Range{}, index.Grouping{}, func(_, v []byte) error {
		c, _, perr := parseCountSum(v)
		reducedCount = c
		return perr
	})
	return
}

// TestReaderClosed: a closed Reader, and a Reader of a closed Index, answer
// ErrClosed; Close may be called twice.
func TestReaderClosed(t *testing.T) {
	ix, err := index.Open(context.Background(), index.Config{NumPartitions: 1, Views: []index.ViewConfig{{Name: "v"}}})
	if err != nil {
		t.Fatal(err)
	}
	rd, err := ix.Reader()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rd.TotalRows("nope"); !errors.Is(err, index.ErrUnknownView) {
		t.Errorf("TotalRows of an unknown view: %v, want ErrUnknownView", err)
	}
	rd.Close()
	rd.Close()
	if _, err := rd.TotalRows("v"); !errors.Is(err, index.ErrClosed) {
		t.Errorf("TotalRows on a closed Reader: %v, want ErrClosed", err)
	}
	rd2, err := ix.Reader()
	if err != nil {
		t.Fatal(err)
	}
	defer rd2.Close()
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	if err := rd2.Query(context.Background(), "v", index.Range{}, func(index.Row) error { return nil }); !errors.Is(err, index.ErrClosed) {
		t.Errorf("Query of a closed index's Reader: %v, want ErrClosed", err)
	}
	if _, err := ix.Reader(); !errors.Is(err, index.ErrClosed) {
		t.Errorf("Reader of a closed index: %v, want ErrClosed", err)
	}
}
