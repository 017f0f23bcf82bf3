package search_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/search"
)

// TestPanickingAnalyzerRefused: a definition whose custom analyzer makes
// bleve panic (an ngram or edge_ngram filter of negative sizes, a shingle
// filter of size 0, a truncate_token filter of length -1) is refused with
// a reason naming the analyzer. bleve accepts them and panics when it
// analyses a document, in scorch's analysis goroutine: the first document
// written would stop the process, and every restart after it. A custom
// analyzer that works (an ngram filter of 2 to 3) is accepted and used.
func TestPanickingAnalyzerRefused(t *testing.T) {
	e := newEnv(t, engine.Couchbase, search.Options{})
	ctx := context.Background()
	def := func(filter string) string {
		return fmt.Sprintf(`{"params":{"mapping":{"default_analyzer":"grams","analysis":{"token_filters":{"f":%s},`+
			`"analyzers":{"grams":{"type":"custom","tokenizer":"unicode","token_filters":["to_lower","f"]}}}}}}`, filter)
	}
	for _, filter := range []string{
		`{"type":"ngram","min":-1,"max":2}`,
		`{"type":"edge_ngram","min":-2,"max":-1,"back":true}`,
		`{"type":"shingle","min":0,"max":0,"output_original":true}`,
		`{"type":"truncate_token","length":-1}`,
	} {
		_, err := e.svc.PutIndex(ctx, "default", "bad", []byte(def(filter)))
		var de *search.DefError
		if !errors.As(err, &de) || !strings.Contains(de.Reason, `"grams"`) {
			t.Errorf("token filter %s: %v, want a DefError naming analyzer \"grams\"", filter, err)
		}
	}
	if _, err := e.svc.GetIndex(ctx, "default", "bad"); !errors.Is(err, search.ErrNotFound) {
		t.Errorf("a refused definition was stored: %v", err)
		e.svc.DeleteIndex(ctx, "default", "bad") // before a document reaches it
	}
	e.createIndex("grams", def(`{"type":"ngram","min":2,"max":3}`))
	e.put("d1", `{"text":"Riverside"}`, 0)
	if a := e.query("grams", `{"query":{"term":"ersi","field":"text"},`+atPlus+`}`); a.TotalHits != 0 {
		t.Errorf("a 4-gram matched an index of 2- and 3-grams: %v", a.ids())
	}
	if a := e.query("grams", `{"query":{"term":"ers","field":"text"},`+atPlus+`}`); !slices.Equal(a.ids(), []string{"d1"}) {
		t.Errorf("the 3-gram ers finds %v, want d1", a.ids())
	}
}
