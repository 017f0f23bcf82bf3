package jsruntime_test

import (
	"context"
	"fmt"

	"github.com/mayflydb/mayfly/jsruntime"
)

// Example maps three documents through a design document with two views,
// one of which reduces with _count, and rereduces two partial counts.
func Example() {
	pool := jsruntime.NewPool(&jsruntime.Options{Workers: 2})
	defer pool.Close()

	prog, err := pool.Load([]jsruntime.ViewSource{
		{Name: "by_type", Map: `function (doc, meta) { emit([doc.type, meta.id], doc.price); }`, Reduce: "_count"},
		{Name: "expensive", Map: `function (doc) { if (doc.price > 10) { emit(doc.price); } }`},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	docs := []jsruntime.Doc{
		{Value: []byte(`{"type":"book","price":12.5}`), Meta: jsruntime.Meta{ID: "b1", Type: jsruntime.TypeJSON}},
		{Value: []byte(`{"type":"pen","price":2}`), Meta: jsruntime.Meta{ID: "p1", Type: jsruntime.TypeJSON}},
		{Value: []byte(`{"type":"book","price":30}`), Meta: jsruntime.Meta{ID: "b2", Type: jsruntime.TypeJSON}},
	}
	res, err := prog.Map(context.Background(), docs)
	if err != nil {
		fmt.Println(err)
		return
	}
	for i, views := range res {
		for j, r := range views {
			for _, e := range r.Emits {
				fmt.Printf("%s %s: %s -> %s\n", docs[i].Meta.ID, prog.Views()[j], e.Key, e.Value)
			}
		}
	}

	count, _ := prog.Reducer("by_type")
	total, err := count.Rereduce(context.Background(), [][]byte{[]byte("2"), []byte("1")})
	fmt.Println("count:", string(total), err)
	// Output:
	// b1 by_type: ["book","b1"] -> 12.5
	// b1 expensive: 12.5 -> null
	// p1 by_type: ["pen","p1"] -> 2
	// b2 by_type: ["book","b2"] -> 30
	// b2 expensive: 30 -> null
	// count: 3 <nil>
}
