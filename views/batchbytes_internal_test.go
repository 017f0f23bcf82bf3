package views

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// A view build maps and writes batches bounded by bytes as well as by
// documents: each batch ends with the change that takes its keys and
// values to Options.BatchBytes (DefaultBatchBytes when none is given), so
// that a build never holds the values, parsed objects and rows of more
// than that plus one document at a time; and every document is indexed,
// with the rows a build of unbounded batches gives. (Batches were bounded
// by documents alone: 20,000 documents of 1 MB would be 20 GB read into
// one batch.)
func TestBuildBatchesHoldAtMostBatchBytes(t *testing.T) {
	const n = 300
	r := rand.New(rand.NewPCG(7, 8))
	values := make([][]byte, n)
	var total int64
	for i := range n {
		size := 100
		if i%3 != 0 {
			size = 1000 + r.IntN(60_000)
		}
		values[i] = fmt.Appendf(nil, `{"n":%d,"text":%q}`, i, strings.Repeat("x", size))
		total += int64(len(fmt.Sprintf("k%04d", i)) + len(values[i]))
	}
	build := func(t *testing.T, opts *Options, budget int64) string {
		t.Helper()
		ctx := context.Background()
		b, svc := newInternalService(t, opts)
		for i, v := range values {
			if _, err := b.DefaultCollection().Upsert(ctx, fmt.Sprintf("k%04d", i), v, nil); err != nil {
				t.Fatal(err)
			}
		}
		var mu sync.Mutex
		var batches [][]int64
		svc.hooks.prepared = func(_ string, sizes []int64) {
			mu.Lock()
			defer mu.Unlock()
			if len(sizes) > 0 {
				batches = append(batches, sizes)
			}
		}
		if _, err := svc.PutDesignDoc(ctx, "default", "d", []byte(`{"views":{"v":{"map":"function(doc, meta){ emit(meta.id, [doc.n, doc.text.length]); }"}}}`)); err != nil {
			t.Fatal(err)
		}
		q, _ := url.ParseQuery("stale=false")
		p, err := ParseParams(q, nil)
		if err != nil {
			t.Fatal(err)
		}
		prep, err := svc.Prepare(ctx, "default", "d", "v", p)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := prep.Run(ctx, &buf); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		var seen int
		for i, sizes := range batches {
			seen += len(sizes)
			var before int64 // the bytes of the batch's changes before its last
			for _, sz := range sizes[:len(sizes)-1] {
				before += sz
			}
			if before >= budget {
				t.Errorf("batch %d: %d changes, %d bytes before its last (%d bytes): want it ended at the change that reached %d bytes",
					i, len(sizes), before, sizes[len(sizes)-1], budget)
			}
		}
		if seen != n {
			t.Errorf("the batches held %d changes, want %d", seen, n)
		}
		if least := int(total / (budget + 62_000)); len(batches) < least {
			t.Errorf("%d batches of %d bytes in all; want at least %d", len(batches), total, least)
		}
		return buf.String()
	}
	var rows [2]string
	t.Run("small bound", func(t *testing.T) {
		rows[0] = build(t, &Options{NoSync: true, BatchBytes: 64 << 10}, 64<<10)
	})
	t.Run("default", func(t *testing.T) {
		rows[1] = build(t, &Options{NoSync: true}, DefaultBatchBytes)
	})
	var got struct {
		TotalRows int `json:"total_rows"`
		Rows      []struct {
			ID    string `json:"id"`
			Key   string `json:"key"`
			Value [2]int `json:"value"`
		} `json:"rows"`
	}
	if err := json.Unmarshal([]byte(rows[0]), &got); err != nil {
		t.Fatalf("%v: %.200s", err, rows[0])
	}
	if got.TotalRows != n || len(got.Rows) != n {
		t.Fatalf("total_rows %d, %d rows; want %d", got.TotalRows, len(got.Rows), n)
	}
	for i, row := range got.Rows {
		var doc struct{ Text string }
		if err := json.Unmarshal(values[i], &doc); err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("k%04d", i); row.ID != want || row.Key != want || row.Value != [2]int{i, len(doc.Text)} {
			t.Errorf("row %d: %+v, want id and key %s, value [%d %d]", i, row, want, i, len(doc.Text))
		}
	}
	if rows[0] != rows[1] {
		t.Errorf("the rows of a build with small batches differ from the default's:\n%.300s\n%.300s", rows[0], rows[1])
	}
}
