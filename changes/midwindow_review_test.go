package changes

import (
	"net/url"
	"testing"
)

// Bug (review of the change feed): a normal (or longpoll) request whose
// since is a row's seq, the checkpoint CouchDB's replicator keeps (the seq
// of the last row it applied), answers only the rest of that row's CAS
// window, not the changes made after it: here nothing, with pending 1. A
// one-shot replication (CouchDB's, PouchDB's: they stop at an answer with
// no rows) then ends without the new document. CouchDB's _changes answers
// every change after since up to the request, and the README says every
// row's seq is a place to resume from. A since of last_seq (a window's
// edge) answers it. So does the since descending=true&limit=1 gives, which
// the README offers as "a since to follow the feed from".
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

	// The README's way to follow the feed from its newest row:
	// descending=true&limit=1 gives "a since to follow the feed from".
	newest := feed(t, b, "descending=true&limit=1").LastSeq
	upsert(t, c, "d", `{}`, 0)
	a = feed(t, b, "since="+url.QueryEscape(newest))
	if len(a.Results) != 1 || a.Results[0].ID != "d" {
		t.Errorf("since descending=true&limit=1's last_seq: %d rows %+v, pending %d; want the row of d", len(a.Results), a.Results, a.Pending)
	}
}
