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
	// Read in pieces, the feed has every document exactly once, whatever
	// the limit: a limit below what one partition's backfill holds goes
	// on after the last document sent (its last_seq names it), and the
	// pending count is what is left.
	for _, limit := range []int{1, 7, 60, 150, 1000} {
		var got []row
		since := "0"
		for range 2 * n {
			a := feed(t, b, fmt.Sprintf("since=%s&limit=%d", url.QueryEscape(since), limit))
			got = append(got, a.Results...)
			since = a.LastSeq
			if left := len(all.Results) - len(got); len(a.Results) > 0 && a.Pending != int64(left) {
				t.Fatalf("limit %d: pending %d after %d rows, want %d", limit, a.Pending, len(got), left)
			}
			if len(a.Results) == 0 {
				break
			}
		}
		if len(got) != len(all.Results) {
			t.Fatalf("limit %d: %d rows in pieces, want %d", limit, len(got), len(all.Results))
		}
		covers(got, all.Results, fmt.Sprintf("limit %d", limit))
	}
	// Backwards, each partition read in segments of its backfill, the
	// feed has every document exactly once too, with values for
	// include_docs; limit=1 sends one row, and the rest are pending.
	for _, q := range []string{"descending=true", "descending=true&include_docs=true"} {
		desc := feed(t, b, q)
		covers(desc.Results, all.Results, q)
		if len(desc.Results) != len(all.Results) || desc.Pending != 0 {
			t.Fatalf("%s: %d rows, pending %d; want %d, 0", q, len(desc.Results), desc.Pending, len(all.Results))
		}
		if q != "descending=true" {
			for _, r := range desc.Results {
				if !r.Deleted && !strings.Contains(string(r.Doc), `"pad":"x`) {
					t.Fatalf("%s: row of %s without its body: %.80s", q, r.ID, r.Doc)
				}
			}
		}
	}
	if one := feed(t, b, "descending=true&limit=1"); len(one.Results) != 1 || one.Pending != int64(len(all.Results)-1) {
		t.Fatalf("descending limit=1: %d rows, pending %d; want 1, %d", len(one.Results), one.Pending, len(all.Results)-1)
	}
}

// TestBackfillTokens: a position inside a backfill survives its token (the
// backfill's end and the last document taken, any bytes of key), and a
// token cut short or with a backfill point at or before its position is
// refused as a bad request.
func TestBackfillTokens(t *testing.T) {
	p := position{uuid: 7, cas: 100, win: 250, part: 3, seq: 40,
		bf: engine.BackfillPoint{End: 90, Collection: 8, Key: "k\x00é/x"}}
	got, err := parsePosition(p.String(), 16)
	if err != nil || got != p {
		t.Fatalf("round trip: %+v, %v; want %+v", got, err, p)
	}
	plain := p
	plain.bf = engine.BackfillPoint{}
	if got, err := parsePosition(plain.String(), 16); err != nil || got != plain {
		t.Fatalf("plain round trip: %+v, %v", got, err)
	}
	tok := p.String()
	for _, bad := range []string{
		tok[:len(tok)-len("k\x00é/x")*4/3-3], // the backfill point cut
		position{uuid: 7, cas: 100, win: 250, part: 3, seq: 40, bf: engine.BackfillPoint{End: 40}}.String()[:16],
	} {
		if _, err := parsePosition(bad, 16); !errors.Is(err, ErrBadRequest) {
			t.Errorf("parsePosition(%q) = %v, want ErrBadRequest", bad, err)
		}
	}
}
