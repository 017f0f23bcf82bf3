package changes

import (
	"net/url"
	"testing"
)

// Bug (review of the change feed): a normal request whose since lies inside
// a CAS window answers only the rest of that window, not the changes made
// after it: here no row, with pending 1. Such a since is any row's seq (the
// checkpoint CouchDB's replicator keeps; the README: "every row's seq is a
// place to resume from"), the last_seq of a batch its limit ended, and the
// since descending=true&limit=1 gives (the README: "a since to follow the
// feed from"). A one-shot replicator that reads batches from each
// checkpoint and is done at an empty answer ends without the new
// documents. CouchDB answers every change after since up to
// the request. A longpoll from the same since answers them; a since at a
// window's edge (an unlimited answer's last_seq) does too.
func TestReviewSinceRowSeqSeesLaterChanges(t *testing.T) {
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
