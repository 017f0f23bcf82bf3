package search

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/internal/enginetest"
)

// An index build hands bleve batches bounded by bytes as well as by
// documents: each batch ends with the change that takes its keys and
// values to Options.BatchBytes (the default's, DefaultBatchBytes, when
// none is given), so that bleve never holds the analysis of more than
// that plus one document at a time, and every document is indexed. (A
// review found that batches were 2,000 documents whatever their size: a
// build of 20 KB documents peaked at 3.5 GB of RSS.)
func TestBuildBatchesHoldAtMostBatchBytes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   *Options
		budget int64
		docs   func(r *rand.Rand, i int) int // a document's text size
	}{
		{"mixed sizes", &Options{BatchBytes: 64 << 10, NoSync: true}, 64 << 10, func(r *rand.Rand, i int) int {
			if i%3 == 0 {
				return 100
			}
			return 1000 + r.IntN(30_000)
		}},
		{"default", &Options{NoSync: true}, DefaultBatchBytes, func(*rand.Rand, int) int { return 20_000 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			eng, b := enginetest.DefaultBucket(t, engine.NewFakeClock(1_700_000_000))
			r := rand.New(rand.NewPCG(7, 8))
			const n = 400
			var total int64
			for i := range n {
				v := fmt.Sprintf(`{"text":%q}`, strings.Repeat("word ", tc.docs(r, i)/5))
				k := fmt.Sprint("doc", i)
				total += int64(len(k) + len(v))
				if _, err := b.DefaultCollection().Upsert(ctx, k, []byte(v), nil); err != nil {
					t.Fatal(err)
				}
			}
			s, err := New(ctx, eng, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			var mu sync.Mutex
			var batches [][]int64
			s.hooks.prepared = func(_ string, sizes []int64) {
				mu.Lock()
				defer mu.Unlock()
				if len(sizes) > 0 {
					batches = append(batches, sizes)
				}
			}
			if _, err := s.PutIndex(ctx, "default", "i", []byte(`{}`)); err != nil {
				t.Fatal(err)
			}
			out, err := s.Search(ctx, "default", "i", []byte(`{"query":{"match_all":{}},"size":0,"ctl":{"timeout":0,"consistency":{"level":"at_plus"}}}`))
			if err != nil {
				t.Fatal(err)
			}
			if out.Total != n {
				t.Fatalf("indexed %d documents, want %d", out.Total, n)
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
				if before >= tc.budget {
					t.Errorf("batch %d: %d changes, %d bytes before its last (%d bytes): want it ended at the change that reached %d bytes",
						i, len(sizes), before, sizes[len(sizes)-1], tc.budget)
				}
			}
			if seen != n {
				t.Errorf("the batches held %d changes, want %d", seen, n)
			}
			if least := int(total / (tc.budget + 31_000)); len(batches) < least {
				t.Errorf("%d batches of %d bytes in all; want at least %d", len(batches), total, least)
			}
		})
	}
}
