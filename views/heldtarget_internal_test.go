package views

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/index"
)

// TestStaleFalseHeldAnswersDuringWriteBack: a stale=false query whose
// changes the index holds answers, with every row, while the right to
// change the index is held (as a paged index's write-back holds it once
// its feed goes quiet, or after a build: seconds at millions of rows); one
// that needs a change the index lacks waits for it and then has it.
func TestStaleFalseHeldAnswersDuringWriteBack(t *testing.T) {
	const hang = 2 * time.Minute // a hang, for a busy machine; never a speed limit
	ctx := context.Background()
	b, svc := newInternalService(t, &Options{NoAutoUpdate: true, NoSync: true, IndexCache: index.NewPageCache(8 << 20)})
	upsertNumbered(t, b, 0, 50)
	if _, err := svc.PutDesignDoc(ctx, "default", "d", []byte(`{"views":{"v":{"map":"function(doc, meta){ emit(doc.n, null); }"}}}`)); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		rows int
		err  error
	}
	query := func() <-chan answer {
		out := make(chan answer, 1)
		go func() {
			p, err := ParseParams(url.Values{"stale": {"false"}}, nil)
			if err != nil {
				out <- answer{err: err}
				return
			}
			q, err := svc.Prepare(ctx, "default", "d", "v", p)
			if err != nil {
				out <- answer{err: err}
				return
			}
			var buf bytes.Buffer
			if err := q.Run(ctx, &buf); err != nil {
				out <- answer{err: err}
				return
			}
			var res struct {
				TotalRows int               `json:"total_rows"`
				Rows      []json.RawMessage `json:"rows"`
			}
			if err := json.Unmarshal(buf.Bytes(), &res); err != nil {
				out <- answer{err: fmt.Errorf("%w: %s", err, buf.String())}
				return
			}
			if res.TotalRows != len(res.Rows) {
				out <- answer{err: fmt.Errorf("total_rows %d, %d rows", res.TotalRows, len(res.Rows))}
				return
			}
			out <- answer{rows: len(res.Rows)}
		}()
		return out
	}
	wait := func(ch <-chan answer, what string) int {
		t.Helper()
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
	if n := wait(query(), "the build's query"); n != 50 {
		t.Fatalf("%d rows after the build, want 50", n)
	}
	ixs := svc.allIndexers()
	if len(ixs) != 1 {
		t.Fatalf("%d indexers", len(ixs))
	}
	unlock, err := ixs[0].feed.Lock(ctx) // as the write-back holds it
	if err != nil {
		t.Fatal(err)
	}
	locked := true
	defer func() {
		if locked {
			unlock()
		}
	}()
	if n := wait(query(), "a stale=false query the index holds, the write-back running"); n != 50 {
		t.Fatalf("%d rows during the write-back, want 50", n)
	}
	upsertNumbered(t, b, 50, 51)
	lacking := query()
	select {
	case a := <-lacking:
		t.Fatalf("a stale=false query answered (%d rows, %v) before its index could take a change it must see", a.rows, a.err)
	default:
	}
	unlock()
	locked = false
	if n := wait(lacking, "a stale=false query after the write-back"); n != 51 {
		t.Fatalf("%d rows after the write-back, want 51", n)
	}
}
