package views

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/index"
)

// TestStaleFalseHeldAnswersDuringWriteBack: a stale=false query whose
// changes the index holds answers, with every row, while the right to
// change the index is held (as a paged index's write-back holds it once
// its feed goes quiet, or after a build: seconds at millions of rows); one
// that needs a change the index lacks waits for it and then has it.
func TestStaleFalseHeldAnswersDuringWriteBack(t *testing.T) {
	ctx := context.Background()
	b, svc, ix := builtIndex(t, 50, false)
	unlock, err := ix.feed.Lock(ctx) // as the write-back holds it
	if err != nil {
		t.Fatal(err)
	}
	locked := true
	defer func() {
		if locked {
			unlock()
		}
	}()
	if n := waitRows(t, staleFalseRows(ctx, svc), "a stale=false query the index holds, the write-back running"); n != 50 {
		t.Fatalf("%d rows during the write-back, want 50", n)
	}
	upsertNumbered(t, b, 50, 51)
	lacking := staleFalseRows(ctx, svc)
	select {
	case a := <-lacking:
		t.Fatalf("a stale=false query answered (%d rows, %v) before its index could take a change it must see", a.rows, a.err)
	default:
	}
	unlock()
	locked = false
	if n := waitRows(t, lacking, "a stale=false query after the write-back"); n != 51 {
		t.Fatalf("%d rows after the write-back, want 51", n)
	}
}

// rowsAnswer is what staleFalseRows gets: the rows of an answer, or why
// there is none.
type rowsAnswer struct {
	rows int
	err  error
}

// staleFalseRows runs a stale=false query of default/_design/d's view v
// in a goroutine and sends the number of rows it answered (checked
// against its total_rows).
func staleFalseRows(ctx context.Context, svc *Service) <-chan rowsAnswer {
	out := make(chan rowsAnswer, 1)
	go func() {
		p, err := ParseParams(url.Values{"stale": {"false"}}, nil)
		if err != nil {
			out <- rowsAnswer{err: err}
			return
		}
		q, err := svc.Prepare(ctx, "default", "d", "v", p)
		if err != nil {
			out <- rowsAnswer{err: err}
			return
		}
		var buf bytes.Buffer
		if err := q.Run(ctx, &buf); err != nil {
			out <- rowsAnswer{err: err}
			return
		}
		var res struct {
			TotalRows int               `json:"total_rows"`
			Rows      []json.RawMessage `json:"rows"`
		}
		if err := json.Unmarshal(buf.Bytes(), &res); err != nil {
			out <- rowsAnswer{err: fmt.Errorf("%w: %s", err, buf.String())}
			return
		}
		if res.TotalRows != len(res.Rows) {
			out <- rowsAnswer{err: fmt.Errorf("total_rows %d, %d rows", res.TotalRows, len(res.Rows))}
			return
		}
		out <- rowsAnswer{rows: len(res.Rows)}
	}()
	return out
}

// waitRows returns the rows staleFalseRows answered, failing the test if
// it failed or gave no answer within two minutes (a hang, for a busy
// machine; never a speed limit).
func waitRows(t *testing.T, ch <-chan rowsAnswer, what string) int {
	t.Helper()
	const hang = 2 * time.Minute
	select {
	case a := <-ch:
		if a.err != nil {
			t.Fatalf("%s: %v", what, a.err)
		}
		return a.rows
	case <-time.After(hang):
		t.Fatalf("%s: no answer after %v", what, hang)
		return 0
	}
}

// TestStaleFalseHeldAnswersDuringCoverFsync: a stale=false query whose
// changes the index holds does not wait for the index's cover mutex,
// which moveTo and syncCover hold while they fsync the file saying which
// partitions the index holds (a design document's move, a cluster node's
// new coverage).
func TestStaleFalseHeldAnswersDuringCoverFsync(t *testing.T) {
	ctx := context.Background()
	_, svc, ix := builtIndex(t, 20, true)
	unlock, err := ix.feed.Lock(ctx) // the right to change the index, as moveTo's caller holds it
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	ix.cover.Lock() // as moveTo holds it through writeCover's fsync
	defer ix.cover.Unlock()
	if n := waitRows(t, staleFalseRows(ctx, svc), "a stale=false query the index holds, its cover file being written"); n != 20 {
		t.Fatalf("%d rows while the cover file is written, want 20", n)
	}
}

// builtIndex starts a views service (no automatic updates, a paged index)
// on a bucket of n numbered documents, builds default/_design/d's view v
// (emit(doc.n, null)) with a stale=false query that must answer n rows,
// and returns the bucket, the service and the view's indexer. With cover
// the service is given every partition first (Service.Cover), as a
// cluster node's views are.
func builtIndex(t *testing.T, n int, cover bool) (*engine.Bucket, *Service, *indexer) {
	t.Helper()
	ctx := context.Background()
	b, svc := newInternalService(t, &Options{NoAutoUpdate: true, NoSync: true, IndexCache: index.NewPageCache(8 << 20)})
	upsertNumbered(t, b, 0, n)
	if _, err := svc.PutDesignDoc(ctx, "default", "d", []byte(`{"views":{"v":{"map":"function(doc, meta){ emit(doc.n, null); }"}}}`)); err != nil {
		t.Fatal(err)
	}
	if cover {
		all := make([]bool, b.NumPartitions())
		for p := range all {
			all[p] = true
		}
		if err := svc.Cover(ctx, "default", all); err != nil {
			t.Fatal(err)
		}
	}
	if got := waitRows(t, staleFalseRows(ctx, svc), "the build's query"); got != n {
		t.Fatalf("%d rows after the build, want %d", got, n)
	}
	ixs := svc.allIndexers()
	if len(ixs) != 1 {
		t.Fatalf("%d indexers", len(ixs))
	}
	return b, svc, ixs[0]
}
