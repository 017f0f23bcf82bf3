package changes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
)

// runIn runs a request on collection cid, with a reverse walk's places
// capped at marks (0: the default), and returns its answer and the feed.
func runIn(t *testing.T, b *engine.Bucket, cid engine.CollectionID, query string, marks int) (answer, *Feed) {
	t.Helper()
	q, err := url.ParseQuery(query)
	if err != nil {
		t.Fatal(err)
	}
	req, err := ParseRequest(q, nil)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	f, err := Open(b, cid, req)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	f.marks = marks
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a feed that waits fails, not hangs
	defer cancel()
	var out bufSink
	if err := f.Run(ctx, &out); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	var a answer
	if err := json.Unmarshal(out.Bytes(), &a); err != nil {
		t.Fatalf("%s: not a JSON answer: %v\n%s", query, err, out.String())
	}
	return a, f
}

// reversed returns rows in the opposite order.
func reversed(rows []row) []row {
	r := slices.Clone(rows)
	slices.Reverse(r)
	return r
}

// sameRows reports how got differs from want (id, seq, rev, deleted, doc),
// "" when it does not.
func sameRows(got, want []row) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d rows, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.ID != w.ID || g.Seq != w.Seq || g.Deleted != w.Deleted || g.Changes[0].Rev != w.Changes[0].Rev || string(g.Doc) != string(w.Doc) {
			return fmt.Sprintf("row %d: %+v, want %+v", i, g, w)
		}
	}
	return ""
}

// descending=true sends the rows of the forward feed from 0 in the
// opposite order, each with the seq the forward feed gives it, whatever the
// filter, include_docs, style or collection; since is ignored; last_seq is
// the seq of the last row sent (the oldest), and pending 0, as CouchDB
// answers (chttpd_changes_test's t_reverse).
func TestDescending(t *testing.T) {
	ctx := context.Background()
	_, b, _ := newBucket(t, t.TempDir())
	c := b.DefaultCollection()
	for i := range 300 {
		upsert(t, c, fmt.Sprintf("k%03d", i), fmt.Sprintf(`{"i":%d}`, i), 0)
	}
	for i := 0; i < 300; i += 7 {
		if _, err := c.Delete(ctx, fmt.Sprintf("k%03d", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i < 300; i += 11 {
		upsert(t, c, fmt.Sprintf("k%03d", i), `{"again":true}`, 0)
	}
	if err := b.CreateScope(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	info, err := b.CreateCollection(ctx, "s", "c", 0)
	if err != nil {
		t.Fatal(err)
	}
	other, err := b.Collection("s", "c")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		upsert(t, other, fmt.Sprintf("o%d", i), `{}`, 0)
	}
	ids := `["k001","k007","k012","k100","nothere"]`
	for _, q := range []string{"", "include_docs=true", "style=all_docs", "filter=_doc_ids&doc_ids=" + url.QueryEscape(ids), "filter=_doc_ids&include_docs=true&doc_ids=" + url.QueryEscape(ids)} {
		for _, cid := range []engine.CollectionID{engine.DefaultCollectionID, info.ID} {
			fwd, _ := runIn(t, b, cid, q, 0)
			if len(fwd.Results) == 0 {
				if strings.Contains(q, "doc_ids") && cid == info.ID {
					continue // none of the IDs is in s.c
				}
				t.Fatalf("%q in %d: no rows", q, cid)
			}
			for _, marks := range []int{0, 1} {
				desc, _ := runIn(t, b, cid, q+"&descending=true&since="+url.QueryEscape(fwd.Results[3].Seq), marks)
				if d := sameRows(desc.Results, reversed(fwd.Results)); d != "" {
					t.Fatalf("%q descending in collection %d (marks %d): %s", q, cid, marks, d)
				}
				if desc.LastSeq != fwd.Results[0].Seq || desc.Pending != 0 {
					t.Errorf("%q descending: last_seq %s, pending %d; want %s (the oldest row's), 0", q, desc.LastSeq, desc.Pending, fwd.Results[0].Seq)
				}
			}
			// In pieces: the first rows of the whole walk, pending the rest.
			for _, limit := range []int{1, 2, len(fwd.Results) - 1} {
				if limit < 1 {
					continue
				}
				desc, _ := runIn(t, b, cid, fmt.Sprintf("%s&descending=true&limit=%d", q, limit), 3)
				want := reversed(fwd.Results)[:limit]
				if d := sameRows(desc.Results, want); d != "" {
					t.Fatalf("%q descending limit %d: %s", q, limit, d)
				}
				if desc.LastSeq != want[limit-1].Seq || desc.Pending != int64(len(fwd.Results)-limit) {
					t.Errorf("%q descending limit %d: last_seq %s pending %d; want %s, %d", q, limit, desc.LastSeq, desc.Pending, want[limit-1].Seq, len(fwd.Results)-limit)
				}
			}
		}
	}
}

// descending=true&limit=1 answers the newest row and a last_seq from which
// a forward feed sends only what comes later (CouchDB's t_reverse_limit_one);
// limit=0 answers no row, pending every row, and the position of the
// moment (t_reverse_limit_zero); a descending longpoll, continuous or
// eventsource feed walks back and ends without waiting, as CouchDB's.
func TestDescendingLatest(t *testing.T) {
	_, b, _ := newBucket(t, t.TempDir())
	c := b.DefaultCollection()
	for i := range 40 {
		upsert(t, c, fmt.Sprintf("k%d", i), `{}`, 0)
	}
	fwd := feed(t, b, "")
	newest := fwd.Results[len(fwd.Results)-1]
	one := feed(t, b, "descending=true&limit=1")
	if len(one.Results) != 1 || one.Results[0].ID != newest.ID || one.LastSeq != newest.Seq || one.Pending != 39 {
		t.Fatalf("descending limit=1: %+v, want the row of %s, last_seq its seq, pending 39", one, newest.ID)
	}
	zero := feed(t, b, "descending=true&limit=0")
	if len(zero.Results) != 0 || zero.Pending != 40 {
		t.Fatalf("descending limit=0: %+v, want no row, pending 40", zero)
	}
	for _, since := range []string{one.LastSeq, zero.LastSeq} {
		if a := feed(t, b, "since="+url.QueryEscape(since)); len(a.Results) != 0 {
			t.Fatalf("forward from a descending last_seq: %+v, want nothing older", a.Results)
		}
	}
	// A longpoll from it answers the next change alone. (A normal feed
	// from a seq inside a window, as a row's is, ends at that window's
	// top, pending counting what came later, as it does going forwards.)
	upsert(t, c, "late", `{}`, 0)
	for _, since := range []string{one.LastSeq, zero.LastSeq} {
		if a := feed(t, b, "feed=longpoll&timeout=60000&since="+url.QueryEscape(since)); len(a.Results) != 1 || a.Results[0].ID != "late" {
			t.Fatalf("longpoll from a descending last_seq after a write: %+v, want late alone", a.Results)
		}
	}

	fwd = feed(t, b, "")
	for _, mode := range []string{"longpoll", "continuous", "eventsource"} {
		out, err := run(context.Background(), b, "feed="+mode+"&descending=true&limit=3")
		if err != nil {
			t.Fatal(err)
		}
		var seqs []string
		for _, l := range strings.Split(out, "\n") {
			var r row
			l = strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(l, "data: "), ","), ",")
			if json.Unmarshal([]byte(l), &r) == nil && r.ID != "" {
				seqs = append(seqs, r.Seq)
			}
		}
		n := len(fwd.Results)
		want := []string{fwd.Results[n-1].Seq, fwd.Results[n-2].Seq, fwd.Results[n-3].Seq}
		if !slices.Equal(seqs, want) {
			t.Errorf("%s descending limit=3: seqs %q, want %q\n%s", mode, seqs, want, out)
		}
	}
	// Without a limit it ends too, once it has walked back (the feed would
	// otherwise wait for its 60 s timeout: runIn's context fails it first).
	a, _ := runIn(t, b, engine.DefaultCollectionID, "feed=longpoll&descending=true", 0)
	if d := sameRows(a.Results, reversed(fwd.Results)); d != "" {
		t.Errorf("longpoll descending: %s", d)
	}
}

// A descending walk holds a bounded number of documents and places,
// however large a partition: with 2 places a pass, each partition of 600
// rows is read in segments of segments, and no more than a chunk of
// documents and a few places per level are held at once, limit=1 or not.
func TestDescendingMemory(t *testing.T) {
	_, b, _ := newBucket(t, t.TempDir())
	c := b.DefaultCollection()
	const n = 16 * 600
	for i := range n {
		upsert(t, c, fmt.Sprintf("k%05d", i), `{}`, 0)
	}
	fwd := feed(t, b, "")
	const marks = 2
	for _, q := range []string{"descending=true", "descending=true&limit=1"} {
		desc, f := runIn(t, b, engine.DefaultCollectionID, q, marks)
		want := reversed(fwd.Results)
		if strings.Contains(q, "limit=1") {
			want = want[:1]
		}
		if d := sameRows(desc.Results, want); d != "" {
			t.Fatalf("%s: %s", q, d)
		}
		// Levels: 600 rows in ≤ marks+1 places, each in ≤ marks+1 more, and so on, then a chunk.
		if bound := chunkSize + 3*(marks+1); f.peak > bound {
			t.Errorf("%s: held %d documents and places at once, want at most %d", q, f.peak, bound)
		}
	}
}

// While writers rewrite and delete documents, a descending walk sends each
// document once at most, and every document no writer touched during it.
func TestDescendingWhileWriting(t *testing.T) {
	_, b, _ := newBucket(t, t.TempDir())
	c := b.DefaultCollection()
	const still = 16 * 300 // a partition's rows read in segments of segments (2 places a pass)
	for i := range still {
		upsert(t, c, fmt.Sprintf("still%d", i), `{}`, 0)
	}
	for i := range 50 {
		upsert(t, c, fmt.Sprintf("busy%d", i), `{}`, 0)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			key := fmt.Sprintf("busy%d", i%50)
			var err error
			if i%3 == 0 {
				_, err = c.Delete(ctx, key, nil)
			} else {
				_, err = c.Upsert(ctx, key, []byte(`{}`), nil)
			}
			if err != nil && ctx.Err() == nil && !errors.Is(err, engine.ErrNotFound) {
				t.Error(err)
				return
			}
		}
	}()
	for range 5 {
		a, _ := runIn(t, b, engine.DefaultCollectionID, "descending=true", 2)
		seen := map[string]bool{}
		untouched := 0
		for _, r := range a.Results {
			if seen[r.ID] {
				t.Fatalf("%s sent twice", r.ID)
			}
			seen[r.ID] = true
			if strings.HasPrefix(r.ID, "still") {
				untouched++
			}
		}
		if untouched != still {
			t.Fatalf("%d untouched documents sent, want %d", untouched, still)
		}
	}
	cancel()
	<-done
}
