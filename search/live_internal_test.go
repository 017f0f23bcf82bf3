package search

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/query"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/internal/enginetest"
)

// liveIndex opens an engine on clk with bucket default and a search
// service (opts) holding index i, all closed when the test ends, and returns
// the bucket and the index's indexer.
func liveIndex(t *testing.T, clk *engine.FakeClock, opts *Options) (*engine.Bucket, *indexer) {
	t.Helper()
	ctx := context.Background()
	eng, b := enginetest.DefaultBucket(t, clk)
	s, err := New(ctx, eng, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.PutIndex(ctx, "default", "i", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	ix, err := s.indexerFor("default", "i")
	if err != nil {
		t.Fatal(err)
	}
	return b, ix
}

// TestLiveKeepsScores: the expiry wrapper changes neither the scores nor the
// order of the hits of live documents, and leaves out the expired ones.
func TestLiveKeepsScores(t *testing.T) {
	ctx := context.Background()
	clk := engine.NewFakeClock(1_700_000_000)
	b, ix := liveIndex(t, clk, nil)
	for i := range 200 {
		var exp int64
		if i%4 == 0 {
			exp = 100 + int64(i)
		}
		v := fmt.Sprintf(`{"text":"%s"}`, [...]string{"red fox", "red red dog", "blue fox jumps", "red"}[i%4])
		b.DefaultCollection().Upsert(ctx, fmt.Sprint("k", i), []byte(v), &engine.WriteOptions{Expiry: exp})
	}
	if err := ix.catchUp(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Advance(200) // expires k0, k4, ... k100
	mq := query.NewMatchQuery("red fox")
	mq.SetField("text")
	plain, err := ix.run(ctx, &bleve.SearchRequest{Query: mq, Size: 200})
	if err != nil {
		t.Fatal(err)
	}
	wrapped, err := ix.run(ctx, &bleve.SearchRequest{Query: live(mq, clk.Now()), Size: 200})
	if err != nil {
		t.Fatal(err)
	}
	scores := map[string]float64{}
	for _, h := range plain.Hits {
		scores[h.ID] = h.Score
	}
	if plain.Total != 200 || wrapped.Total != 174 {
		t.Fatalf("totals %d, %d", plain.Total, wrapped.Total)
	}
	for _, h := range wrapped.Hits {
		if h.Score != scores[h.ID] {
			t.Fatalf("%s: score %v, unwrapped %v", h.ID, h.Score, scores[h.ID])
		}
	}
}

// TestLiveFilterMatchesClause: the cached expiry filter (liveQuery) gives
// the same hits, total and facets as the plain must_not clause, while
// documents are written, re-expired, persisted and deleted between queries
// and the clock moves forward (one second or several) and back.
func TestLiveFilterMatchesClause(t *testing.T) {
	ctx := context.Background()
	t0 := int64(1_700_000_000)
	clk := engine.NewFakeClock(t0)
	b, ix := liveIndex(t, clk, &Options{NoAutoUpdate: true})
	r := rand.New(rand.NewPCG(5, 6))
	coll := b.DefaultCollection()
	write := func(key string) {
		var exp int64
		if r.IntN(3) > 0 {
			exp = clk.Now() + 1 + r.Int64N(20) // absolute
		}
		v := fmt.Sprintf(`{"text":"fox %d","color":"c%d"}`, r.IntN(5), r.IntN(4))
		if _, err := coll.Upsert(ctx, key, []byte(v), &engine.WriteOptions{Expiry: exp}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 300 {
		write(fmt.Sprint("k", i))
	}
	facets := bleve.FacetsRequest{"colors": bleve.NewFacetRequest("color", 10)}
	for step := range 60 {
		if step > 0 {
			for range r.IntN(20) {
				key := fmt.Sprint("k", r.IntN(300))
				switch r.IntN(4) {
				case 0:
					coll.Delete(ctx, key, nil)
				case 1:
					coll.Touch(ctx, key, 0) // never expires; an error when expired
				default:
					write(key)
				}
			}
		}
		if err := ix.catchUp(ctx); err != nil {
			t.Fatal(err)
		}
		switch r.IntN(5) {
		case 0:
			clk.Advance(-1)
		case 1:
			clk.Advance(3)
		default:
			clk.Advance(1)
		}
		// Twice each: the second query of a second uses the cache.
		for range 2 {
			mq := query.NewMatchQuery("fox")
			mq.SetField("text")
			want, err := ix.run(ctx, &bleve.SearchRequest{Query: live(mq, clk.Now()), Size: 300, Sort: search.SortOrder{&search.SortDocID{}}, Facets: facets})
			if err != nil {
				t.Fatal(err)
			}
			got, err := ix.runLive(ctx, &bleve.SearchRequest{Query: mq, Size: 300, Sort: search.SortOrder{&search.SortDocID{}}, Facets: facets}, clk.Now())
			if err != nil {
				t.Fatal(err)
			}
			if got.Total != want.Total || len(got.Hits) != len(want.Hits) {
				t.Fatalf("step %d: total %d (%d hits), want %d (%d)", step, got.Total, len(got.Hits), want.Total, len(want.Hits))
			}
			for i := range got.Hits {
				if got.Hits[i].ID != want.Hits[i].ID || got.Hits[i].Score != want.Hits[i].Score {
					t.Fatalf("step %d: hit %d is %s (%v), want %s (%v)", step, i, got.Hits[i].ID, got.Hits[i].Score, want.Hits[i].ID, want.Hits[i].Score)
				}
			}
			if g, w := facetTerms(got.Facets["colors"]), facetTerms(want.Facets["colors"]); g != w {
				t.Fatalf("step %d: facets %s, want %s", step, g, w)
			}
		}
	}
}

func facetTerms(f *search.FacetResult) string {
	out := fmt.Sprint("total=", f.Total)
	for _, t := range f.Terms.Terms() {
		out += fmt.Sprintf(" %s=%d", t.Term, t.Count)
	}
	return out
}
