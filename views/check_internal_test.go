package views

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/index"
)

// Check finds a row of a document that does not exist, and a document whose
// rows are missing: it is not a check that cannot fail.
func TestCheckFindsStrayAndMissingRows(t *testing.T) {
	ctx := context.Background()
	b, svc := newInternalService(t, &Options{NoAutoUpdate: true})
	if _, err := svc.PutDesignDoc(ctx, "default", "d", []byte(`{"views":{"v":{"map":"function(doc, meta){ emit(doc.k, 1); }","reduce":"_count"}}}`)); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b", "c"} {
		if _, err := b.DefaultCollection().Upsert(ctx, k, []byte(`{"k":"`+k+`"}`), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := svc.Check(ctx); err != nil {
		t.Fatalf("a healthy index: %v", err)
	}
	ixs := svc.allIndexers()
	if len(ixs) != 1 {
		t.Fatalf("%d indexers", len(ixs))
	}
	idx := ixs[0].idx
	err := idx.Apply(ctx, []index.DocUpdate{
		{DocID: "ghost", Partition: 0, Seq: 1, Rows: map[string][]index.Emit{"v": {{Key: []byte(`"g"`), Value: []byte(`1`)}}}},
		{DocID: "b", Partition: 0, Seq: 1}, // b's rows leave the index
	})
	if err != nil {
		t.Fatal(err)
	}
	err = svc.Check(ctx)
	if !errors.Is(err, ErrCheck) || !strings.Contains(err.Error(), `"ghost"`) || !strings.Contains(err.Error(), `"b" misses`) {
		t.Fatalf("Check after tampering: %v", err)
	}
}
