package search

import (
	"context"
	"fmt"
	"testing"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/search/query"
	"github.com/mayflydb/mayfly/engine"
)

// TestLiveKeepsScores: the expiry wrapper changes neither the scores nor the
// order of the hits of live documents, and leaves out the expired ones.
func TestLiveKeepsScores(t *testing.T) {
	ctx := context.Background()
	clk := engine.NewFakeClock(1_700_000_000)
	eng, err := engine.Open(t.TempDir(), &engine.Options{Clock: clk, NumPartitions: 8, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	b, err := eng.CreateBucket(ctx, engine.DefaultBucketSettings("default"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(ctx, eng, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.PutIndex(ctx, "default", "i", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		var exp int64
		if i%4 == 0 {
			exp = 100 + int64(i)
		}
		v := fmt.Sprintf(`{"text":"%s"}`, [...]string{"red fox", "red red dog", "blue fox jumps", "red"}[i%4])
		b.DefaultCollection().Upsert(ctx, fmt.Sprint("k", i), []byte(v), &engine.WriteOptions{Expiry: exp})
	}
	ix, _ := s.indexerFor("default", "i")
	if err := ix.catchUp(ctx, b.HighSeqnos()); err != nil {
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
