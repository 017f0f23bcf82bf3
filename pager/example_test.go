package pager_test

import (
	"context"
	"fmt"
	"os"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/pager"
)

// Example drives a Manager by hand with a fake clock: lowering
// exp_pager_stime reschedules the next run at once, and Tick runs it when
// the clock reaches it.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "pager")
	defer os.RemoveAll(dir)
	clk := engine.NewFakeClock(1_700_000_000)
	eng, err := engine.Open(dir, &engine.Options{Clock: clk, NumPartitions: 8})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer eng.Close()
	b, _ := eng.CreateBucket(ctx, engine.DefaultBucketSettings("default"))
	for _, k := range []string{"a", "b", "c"} {
		b.DefaultCollection().Upsert(ctx, k, []byte(`{}`), &engine.WriteOptions{Expiry: 5})
	}

	m := pager.New(eng, nil) // m.Start() would tick in the background
	defer m.Close(ctx)
	s, _ := m.Settings("default")
	fmt.Println("next run in", s.NextRun-clk.Now(), "s")
	stime := int64(10)
	s, _ = m.SetSettings(ctx, "default", &stime, nil)
	fmt.Println("next run in", s.NextRun-clk.Now(), "s")

	clk.Advance(10)
	m.Tick(ctx)
	st := b.Stats()
	fmt.Println("purged", st.ExpiredPager, "in", st.PagerRuns, "run; items left", st.CurrItems)
	// Output:
	// next run in 3600 s
	// next run in 10 s
	// purged 3 in 1 run; items left 0
}
