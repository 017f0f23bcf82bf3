package index_test

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/index"
)

// TestForecastIncludeCountsOnlyTheSubset: a forecast with Range.Include (a
// cluster node's share of a view) counts and reduces only the rows of the
// subset's documents, as a forecast of an index holding only them does,
// whole view and key range alike (it ignored Include before forecasts were
// answered across nodes, counting every row the node's index held).
func TestForecastIncludeCountsOnlyTheSubset(t *testing.T) {
	ctx := context.Background()
	all, some := openIndex(t, liveConfig("")), openIndex(t, liveConfig(""))
	even := index.NewSubset(func(id string) bool {
		n, _ := strconv.Atoi(strings.TrimPrefix(id, "d"))
		return n%2 == 0
	})
	const now = 10_000
	for i := range 600 {
		id := fmt.Sprintf("d%04d", i)
		rows := map[string][]index.Emit{}
		for _, view := range []string{"cs", "mm", "map"} {
			rows[view] = []index.Emit{{Key: []byte(strconv.Itoa(i % 40)), Value: []byte(strconv.Itoa(i % 97))}}
		}
		up := index.DocUpdate{DocID: id, Seq: uint64(i + 1), Expiration: now - 200 + int64(i*7), Rows: rows}
		apply(t, all, up)
		if even.Has(id) {
			apply(t, some, up)
		}
	}
	for _, view := range []string{"cs", "mm", "map"} {
		for _, r := range []index.Range{{}, {StartKey: js("5"), EndKey: js("30")}} {
			want, err := some.Forecast(ctx, view, r, now, 300, 3000, true)
			if err != nil {
				t.Fatal(err)
			}
			r.Include = even
			got, err := all.Forecast(ctx, view, r, now, 300, 3000, true)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s %+v: %+v\nwant %+v", view, r, got, want)
			}
			if want.Intervals[0].Rows == 0 || want.Expired.Rows == 0 {
				t.Fatalf("%s %+v: nothing expires: %+v", view, r, want)
			}
		}
	}
}
