package search

import (
	"context"
	"errors"
	"testing"

	"github.com/blevesearch/bleve/v2"
)

// panicking is a real in-memory bleve index whose searches panic, as bleve
// does on a request it fails to check (the triggers known are refused
// before bleve sees them; this stands for the next one).
type panicking struct{ target }

func (panicking) SearchInContext(context.Context, *bleve.SearchRequest) (*bleve.SearchResult, error) {
	panic("index out of range [-1]")
}

// A target of an alias that panics while searching fails alone: bleve runs
// each target in a goroutine of its own, where the panic stopped the
// process (the test binary, here); now the answer comes from the others,
// with the failure counted in its status, and the same index searched
// alone answers a QueryError.
func TestAliasTargetPanicFailsAlone(t *testing.T) {
	open := func(name string) bleve.Index {
		idx, err := bleve.NewMemOnly(bleve.NewIndexMapping())
		if err != nil {
			t.Fatal(err)
		}
		idx.SetName(name)
		t.Cleanup(func() { idx.Close() })
		return idx
	}
	good := open("good")
	if err := good.Index("d1", map[string]any{"f": "hello"}); err != nil {
		t.Fatal(err)
	}
	bad := panicking{open("bad")}
	req := bleve.NewSearchRequest(bleve.NewMatchQuery("hello"))
	res, err := bleve.NewIndexAlias(recovering{good}, recovering{bad}).SearchInContext(context.Background(), req)
	if err != nil {
		t.Fatalf("alias search with one panicking target: %v; want the other target's answer", err)
	}
	if res.Total != 1 || res.Status.Failed != 1 || res.Status.Successful != 1 {
		t.Fatalf("alias answer: total %d, status %+v; want 1 hit, 1 failed, 1 successful", res.Total, res.Status)
	}
	_, err = searchRecovering(context.Background(), bad, req)
	var qe *QueryError
	if !errors.As(err, &qe) {
		t.Fatalf("the panicking index alone: %v; want a QueryError", err)
	}
}
