package index_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/index"
)

// sumReducer is _sum as the built-in computes it for number values: a float
// sum, rereduced the same way.
type sumReducer struct{}

func (sumReducer) Reduce(_ context.Context, _ [][]byte, _ []string, values [][]byte) ([]byte, error) {
	return sumOfValues(values)
}

func (sumReducer) Rereduce(_ context.Context, values [][]byte) ([]byte, error) {
	return sumOfValues(values)
}

func sumOfValues(values [][]byte) ([]byte, error) {
	var s float64
	for _, v := range values {
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil {
			return nil, err
		}
		s += f
	}
	return strconv.AppendFloat(nil, s, 'g', -1, 64), nil
}

// Exact-answer benchmark data: benchRows documents as in benchBatches, into
// a _sum view, every one expiring within a day of excludeT0, in an order
// unrelated to their keys: about 11.6 documents a second.
const (
	excludeT0      = 1_700_000_000
	excludeDay     = 86400
	excludePerStep = 10_000 // rows newly expired between two measured queries
)

// excludeExp is the expiration of document i of a permutation perm.
func excludeExp(perm []int, i int) int64 {
	return excludeT0 + 1 + int64(perm[i])*excludeDay/benchRows
}

func buildExcludeBench(b *testing.B) (*index.Index, []int) {
	b.Helper()
	ix, err := index.Open(context.Background(), index.Config{NumPartitions: 1024, Views: []index.ViewConfig{{Name: "v", Reducer: sumReducer{}}}})
	if err != nil {
		b.Fatal(err)
	}
	perm := rand.New(rand.NewPCG(3, 4)).Perm(benchRows)
	for _, batch := range benchBatches() {
		for j := range batch {
			var i int
			fmt.Sscanf(batch[j].DocID, "doc%d", &i)
			batch[j].Expiration = excludeExp(perm, i)
		}
		if err := ix.Apply(context.Background(), batch); err != nil {
			b.Fatal(err)
		}
	}
	return ix, perm
}

// BenchmarkExcludeExpired measures exact answers (Range.ExcludeExpired) on a
// 1,000,000-row _sum view whose every document expires within a day:
// reduce=true and group_level=1 in include mode, in exclude mode with
// nothing newly expired since the last query, and in exclude mode right
// after 10,000 more rows expired (the clock moves on by about 864 s before
// each query, and the expired rows stay unpurged, so they pile up as the
// benchmark runs); and the view forecast over a 24-hour horizon in hours.
// Each op of the newly-expired cases moves the clock; when nearly every row
// has expired, the clock goes back two hours in, untimed.
func BenchmarkExcludeExpired(b *testing.B) {
	ix, _ := buildExcludeBench(b)
	defer ix.Close()
	ctx := context.Background()
	// The clock starts two hours in: about 83,000 rows are expired already.
	now := int64(excludeT0 + 7200)
	step := int64(excludePerStep) * excludeDay / benchRows
	reduce := func(b *testing.B, exclude bool, g index.Grouping) {
		n := 0
		err := ix.Reduce(ctx, "v", index.Range{ExcludeExpired: exclude, Now: now}, g, func(_, _ []byte) error {
			n++
			return nil
		})
		if err != nil || n == 0 {
			b.Fatalf("Reduce: %v, %d groups", err, n)
		}
	}
	for _, tc := range []struct {
		name string
		g    index.Grouping
	}{{"reduce", index.Grouping{}}, {"group_level=1", index.Grouping{Level: 1}}} {
		b.Run(tc.name+"/include", func(b *testing.B) {
			reduce(b, false, tc.g)
			for b.Loop() {
				reduce(b, false, tc.g)
			}
		})
		b.Run(tc.name+"/exclude-nothing-new", func(b *testing.B) {
			reduce(b, true, tc.g)
			for b.Loop() {
				reduce(b, true, tc.g)
			}
		})
		b.Run(tc.name+"/exclude-10k-newly-expired", func(b *testing.B) {
			reduce(b, true, tc.g)
			var cpu time.Duration
			for b.Loop() {
				b.StopTimer()
				if now+step > excludeT0+excludeDay-3600 {
					// Nearly everything has expired: start again (untimed).
					now = excludeT0 + 7200
					reduce(b, true, tc.g)
				}
				now += step
				c := cpuTime()
				b.StartTimer()
				reduce(b, true, tc.g)
				cpu += cpuTime() - c
			}
			b.ReportMetric(float64(excludePerStep), "newly-expired/op")
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/op")
		})
	}
	b.Run("forecast-24h", func(b *testing.B) {
		rows := int64(0)
		if _, err := ix.Forecast(ctx, "v", index.Range{}, now, 3600, excludeDay, true); err != nil {
			b.Fatal(err)
		}
		cpu := cpuTime()
		for b.Loop() {
			f, err := ix.Forecast(ctx, "v", index.Range{}, now, 3600, excludeDay, true)
			if err != nil {
				b.Fatal(err)
			}
			rows = f.Expired.Rows
			for _, iv := range f.Intervals {
				rows += iv.Rows
			}
		}
		b.ReportMetric(float64(rows), "rows")
		b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/1000/float64(b.N), "cpu-ms/op")
	})
	b.Run("forecast-24h-cold", func(b *testing.B) {
		// After a write, the paths it changed have no cached reduction.
		for b.Loop() {
			b.StopTimer()
			ups := []index.DocUpdate{{DocID: "extra", Seq: 1, Expiration: now + 10, Rows: map[string][]index.Emit{"v": {{Key: []byte(`["g"]`), Value: []byte("1")}}}}}
			if err := ix.Apply(ctx, ups); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if _, err := ix.Forecast(ctx, "v", index.Range{}, now, 3600, excludeDay, true); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("forecast-24h-keyrange", func(b *testing.B) {
		// A key range is answered by a walk of the view's tree: every row
		// of the range (1/10 of the view) expires within the horizon.
		for b.Loop() {
			r := index.Range{StartKey: []byte(`["g0000"]`), EndKey: []byte(`["g0100"]`)}
			if _, err := ix.Forecast(ctx, "v", r, now, 3600, excludeDay, true); err != nil {
				b.Fatal(err)
			}
		}
	})
}
