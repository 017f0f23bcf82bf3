package changes

import (
	"net/url"
	"testing"
)

// A normal request whose since lies inside a CAS window (any row's seq, the
// checkpoint CouchDB's replicator keeps; the last_seq of a batch its limit
// ended; the since descending=true&limit=1 gives) answers the rest of that
// window and then every change made after it, up to the request, as a
// longpoll from the same since and a since at a window's edge do: a
// one-shot replicator that reads batches until an empty one gets every
// document. A review found it answered only the rest of that window (no
// row, pending 1).
func TestSinceInsideWindowSeesLaterChanges(t *testing.T) {
	_, b, _ := newBucket(t, t.TempDir())
	c := b.DefaultCollection()
	upsert(t, c, "a", `{}`, 0)
	upsert(t, c, "b", `{}`, 0)
	first := feed(t, b, "")
	if len(first.Results) != 2 {
		t.Fatalf("first read: %+v", first)
	}
	lastRow := first.Results[len(first.Results)-1].Seq
	upsert(t, c, "c", `{}`, 0)

	if a := feed(t, b, "since="+url.QueryEscape(first.LastSeq)); len(a.Results) != 1 || a.Results[0].ID != "c" {
		t.Errorf("since last_seq: %+v, want the row of c", a)
	}
	a := feed(t, b, "since="+url.QueryEscape(lastRow))
	if len(a.Results) != 1 || a.Results[0].ID != "c" {
		t.Errorf("since the last row's seq: %d rows %+v, pending %d; want the row of c", len(a.Results), a.Results, a.Pending)
	}
	a = feed(t, b, "feed=longpoll&timeout=0&since="+url.QueryEscape(lastRow))
	if len(a.Results) != 1 || a.Results[0].ID != "c" {
		t.Errorf("longpoll since the last row's seq: %d rows %+v, pending %d; want the row of c", len(a.Results), a.Results, a.Pending)
	}

	// A batch that ends with a limit at its window's last row: its own
	// last_seq is inside the window, and a replicator reading in batches
	// (PouchDB: limit=batch_size, since=last_seq, done at an empty batch)
	// stops there.
	batch := feed(t, b, "limit=3")
	if len(batch.Results) != 3 || batch.Pending != 0 {
		t.Fatalf("limit=3: %+v", batch)
	}
	upsert(t, c, "c2", `{}`, 0)
	a = feed(t, b, "limit=3&since="+url.QueryEscape(batch.LastSeq))
	if len(a.Results) != 1 || a.Results[0].ID != "c2" {
		t.Errorf("limit=3 since the last_seq of a full batch: %d rows %+v, pending %d; want the row of c2", len(a.Results), a.Results, a.Pending)
	}

	// The README's way to follow the feed from its newest row:
	// descending=true&limit=1 gives "a since to follow the feed from".
	newest := feed(t, b, "descending=true&limit=1").LastSeq
	upsert(t, c, "d", `{}`, 0)
	a = feed(t, b, "since="+url.QueryEscape(newest))
	if len(a.Results) != 1 || a.Results[0].ID != "d" {
		t.Errorf("since descending=true&limit=1's last_seq: %d rows %+v, pending %d; want the row of d", len(a.Results), a.Results, a.Pending)
	}
}
