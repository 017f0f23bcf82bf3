package changes

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
)

// TestResumeAcrossBackfills: over a fullEviction bucket whose items are
// out of memory whole in every partition (a window's first partition
// backfills the later ones' in the same pass), the whole feed has every
// document exactly once, a read from any row's seq has at least every
// document of the rows after it (rows inside a backfill may come again,
// none is lost), and so does the feed read in pieces from each last_seq
// (a limited read backfills ahead only what it can send whole).
func TestResumeAcrossBackfills(t *testing.T) {
	ctx := context.Background()
	eng, err := engine.Open(t.TempDir(), &engine.Options{NumPartitions: 16, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := eng.Check(ctx); err != nil && !errors.Is(err, engine.ErrClosed) {
			t.Errorf("engine.Check: %v", err)
		}
		eng.Close()
	})
	b, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "b", RAMQuotaMB: 1, EvictionPolicy: engine.FullEviction})
	if err != nil {
		t.Fatal(err)
	}
	c := b.DefaultCollection()
	const n = 400 // 1.6 MB of values in a 1 MiB quota
	pad := strings.Repeat("x", 4000)
	for i := range n {
		upsert(t, c, fmt.Sprintf("k%03d", i), fmt.Sprintf(`{"i":%d,"pad":%q}`, i, pad), 0)
	}
	for i := 0; i < n; i += 9 {
		if _, err := c.Delete(ctx, fmt.Sprintf("k%03d", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute) // wall clock: only to catch a hang
	for b.Stats().NonResident < n/4 {
		if time.Now().After(deadline) { // wall clock: only to catch a hang
			t.Fatalf("items out of memory: %d of %d", b.Stats().NonResident, n)
		}
		time.Sleep(10 * time.Millisecond)
	}

	all := feed(t, b, "")
	seen := map[string]int{}
	for _, r := range all.Results {
		seen[r.ID]++
	}
	if len(seen) != n {
		t.Fatalf("whole feed: %d documents, want %d", len(seen), n)
	}
	for id, k := range seen {
		if k != 1 {
			t.Fatalf("whole feed: %s comes %d times", id, k)
		}
	}
	covers := func(rows []row, want []row, what string) {
		t.Helper()
		got := map[string]bool{}
		for _, r := range rows {
			got[r.ID] = true
		}
		for _, r := range want {
			if !got[r.ID] {
				t.Fatalf("%s: %s is missing", what, r.ID)
			}
		}
	}
	for i := 0; i < len(all.Results); i += 7 {
		rest := feed(t, b, "since="+url.QueryEscape(all.Results[i].Seq))
		covers(rest.Results, all.Results[i+1:], fmt.Sprintf("from row %d", i))
	}
	// (A limit below what one partition holds never passes a backfill of
	// it: a position inside one is where it began.)
	for _, limit := range []int{60, 150, 1000} {
		var got []row
		since := "0"
		for range 10 * n {
			a := feed(t, b, fmt.Sprintf("since=%s&limit=%d", url.QueryEscape(since), limit))
			got = append(got, a.Results...)
			since = a.LastSeq
			if len(a.Results) == 0 {
				break
			}
		}
		covers(got, all.Results, fmt.Sprintf("limit %d", limit))
	}
}
