package changes

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/internal/leaktest"
)

// TestMain fails the package's tests if a feed's goroutine outlives them.
func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }

const t0 = 1_700_000_000

func newBucket(t *testing.T, dir string) (*engine.Engine, *engine.Bucket, *engine.FakeClock) {
	t.Helper()
	clk := engine.NewFakeClock(t0)
	eng, err := engine.Open(dir, &engine.Options{Clock: clk, NumPartitions: 16, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := eng.Check(context.Background()); err != nil && !errors.Is(err, engine.ErrClosed) {
			t.Errorf("engine.Check: %v", err)
		}
		eng.Close()
	})
	b, err := eng.Bucket("b")
	if err != nil {
		if b, err = eng.CreateBucket(context.Background(), engine.BucketSettings{Name: "b", Type: engine.Couchbase}); err != nil {
			t.Fatal(err)
		}
	}
	return eng, b, clk
}

// row is one decoded row of the feed.
type row struct {
	Seq     string                 `json:"seq"`
	ID      string                 `json:"id"`
	Changes []struct{ Rev string } `json:"changes"`
	Deleted bool                   `json:"deleted"`
	Expired bool                   `json:"expired"`
	Doc     json.RawMessage        `json:"doc"`
}

type answer struct {
	Results []row  `json:"results"`
	LastSeq string `json:"last_seq"`
	Pending int64  `json:"pending"`
}

// bufSink collects what a feed writes.
type bufSink struct{ bytes.Buffer }

func (*bufSink) Flush() error { return nil }

// lockedSink collects what a feed writes while the test reads it.
type lockedSink struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *lockedSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (*lockedSink) Flush() error { return nil }

func (s *lockedSink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// feed runs a normal (or longpoll) request given as a query string and
// decodes its answer.
func feed(t *testing.T, b *engine.Bucket, query string) answer {
	t.Helper()
	out, err := run(context.Background(), b, query)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	var a answer
	if err := json.Unmarshal([]byte(out), &a); err != nil {
		t.Fatalf("%s: not a JSON answer: %v\n%s", query, err, out)
	}
	return a
}

func run(ctx context.Context, b *engine.Bucket, query string) (string, error) {
	q, err := url.ParseQuery(query)
	if err != nil {
		return "", err
	}
	req, err := ParseRequest(q, nil)
	if err != nil {
		return "", err
	}
	f, err := Open(b, engine.DefaultCollectionID, req)
	if err != nil {
		return "", err
	}
	var out bufSink
	err = f.Run(ctx, &out)
	return out.String(), err
}

func upsert(t *testing.T, c *engine.Collection, key, value string, expiry int64) *engine.Document {
	t.Helper()
	d, err := c.Upsert(context.Background(), key, []byte(value), &engine.WriteOptions{Expiry: expiry})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Every row's seq is a position: reading from it gives exactly the rows
// after it, and the feed read in pieces of any size from each last_seq
// gives the same rows as read whole.
func TestResumeFromEveryRow(t *testing.T) {
	_, b, _ := newBucket(t, t.TempDir())
	c := b.DefaultCollection()
	for i := range 60 {
		upsert(t, c, fmt.Sprintf("k%d", i), `{"i":1}`, 0)
	}
	for i := 0; i < 60; i += 7 {
		if _, err := c.Delete(context.Background(), fmt.Sprintf("k%d", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	all := feed(t, b, "")
	if len(all.Results) != 60 || all.Pending != 0 {
		t.Fatalf("whole feed: %d rows, pending %d; want 60, 0", len(all.Results), all.Pending)
	}
	for i, r := range all.Results {
		rest := feed(t, b, "since="+url.QueryEscape(r.Seq))
		if len(rest.Results) != len(all.Results)-i-1 {
			t.Fatalf("from row %d: %d rows, want %d", i, len(rest.Results), len(all.Results)-i-1)
		}
		for j, rr := range rest.Results {
			if want := all.Results[i+1+j]; rr.ID != want.ID || rr.Seq != want.Seq {
				t.Fatalf("from row %d, row %d: %s %s, want %s %s", i, j, rr.ID, rr.Seq, want.ID, want.Seq)
			}
		}
		if rest.LastSeq != all.LastSeq {
			t.Fatalf("from row %d: last_seq %s, want %s", i, rest.LastSeq, all.LastSeq)
		}
	}
	for _, limit := range []int{1, 3, 59} {
		var got []string
		since := "0"
		for range 100 {
			a := feed(t, b, fmt.Sprintf("since=%s&limit=%d", url.QueryEscape(since), limit))
			for _, r := range a.Results {
				got = append(got, r.ID)
			}
			if want := int64(len(all.Results) - len(got)); a.Pending != want {
				t.Fatalf("limit %d after %d rows: pending %d, want %d", limit, len(got), a.Pending, want)
			}
			since = a.LastSeq
			if len(a.Results) == 0 {
				break
			}
		}
		if len(got) != len(all.Results) {
			t.Fatalf("limit %d: %d rows in pieces, want %d", limit, len(got), len(all.Results))
		}
	}
	// limit=0 answers pending only.
	if a := feed(t, b, "since="+url.QueryEscape(all.Results[9].Seq)+"&limit=0"); len(a.Results) != 0 || a.Pending != 50 {
		t.Fatalf("limit=0: %d rows, pending %d; want 0, 50", len(a.Results), a.Pending)
	}
	// since=now shows nothing that came before.
	now := feed(t, b, "since=now")
	upsert(t, c, "late", `{}`, 0)
	if a := feed(t, b, "since="+url.QueryEscape(now.LastSeq)); len(a.Results) != 1 || a.Results[0].ID != "late" {
		t.Fatalf("after since=now: %+v", a.Results)
	}
}

// A consumer that checkpoints rows while writers run ends up with every
// document's latest revision, deletions included, whatever the order in
// which concurrent writes reached disk.
func TestConcurrentConsumerConverges(t *testing.T) {
	_, b, _ := newBucket(t, t.TempDir())
	c := b.DefaultCollection()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for i := 0; ctx.Err() == nil && i < 400; i++ {
				key := fmt.Sprintf("k%d", rng.IntN(80))
				var err error
				if rng.IntN(5) == 0 {
					_, err = c.Delete(ctx, key, nil)
				} else {
					_, err = c.Upsert(ctx, key, []byte(`{}`), nil)
				}
				if err != nil && !errors.Is(err, engine.ErrNotFound) {
					t.Error(err)
					return
				}
			}
		})
	}
	seen := map[string]row{}
	since := "0"
	check := func() {
		a := feed(t, b, fmt.Sprintf("since=%s&limit=%d", url.QueryEscape(since), 1+len(seen)%7))
		for _, r := range a.Results {
			seen[r.ID] = r
			since = r.Seq // any row's seq is a checkpoint
		}
		if len(a.Results) == 0 {
			since = a.LastSeq
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for loop := true; loop; {
		select {
		case <-done:
			loop = false
		default:
			check()
		}
	}
	cancel()
	for range 1000 {
		if a := feed(t, b, "since="+url.QueryEscape(since)+"&limit=0"); a.Pending == 0 {
			break
		}
		check()
	}
	for i := range 80 {
		key := fmt.Sprintf("k%d", i)
		d, err := c.Get(context.Background(), key)
		r, ok := seen[key]
		switch {
		case err == nil && (!ok || r.Deleted || r.Changes[0].Rev != d.Rev()):
			t.Errorf("%s: live at %s, the consumer has %+v", key, d.Rev(), r)
		case errors.Is(err, engine.ErrNotFound) && ok && !r.Deleted:
			t.Errorf("%s: deleted, the consumer has it live at %s", key, r.Changes[0].Rev)
		}
	}
}

// Each mode frames the same rows its own way.
func TestModes(t *testing.T) {
	_, b, _ := newBucket(t, t.TempDir())
	c := b.DefaultCollection()
	upsert(t, c, "a", `{"x":1}`, 0)
	upsert(t, c, "b", `[1,2]`, 0)
	upsert(t, c, "c", `not json`, 0)

	a := feed(t, b, "include_docs=true")
	if len(a.Results) != 3 {
		t.Fatalf("normal: %+v", a)
	}
	docs := map[string]string{}
	for _, r := range a.Results {
		docs[r.ID] = string(r.Doc)
	}
	ra := upsert(t, c, "a", `{"x":1}`, 0) // a second revision
	if !strings.Contains(docs["a"], `"x":1`) || !strings.Contains(docs["a"], `"_id":"a"`) || strings.Contains(docs["a"], ra.Rev()) {
		t.Errorf("doc of a: %s", docs["a"])
	}
	if !strings.Contains(docs["b"], `"json":[1,2]`) || !strings.Contains(docs["c"], `"base64":"bm90IGpzb24="`) {
		t.Errorf("docs of b and c: %s %s", docs["b"], docs["c"])
	}

	// longpoll from the end waits for the next change, then answers it.
	ctx := context.Background()
	end := feed(t, b, "").LastSeq
	got := make(chan answer, 1)
	go func() {
		out, err := run(ctx, b, "feed=longpoll&timeout=60000&since="+url.QueryEscape(end))
		var a answer
		if err == nil {
			err = json.Unmarshal([]byte(out), &a)
		}
		if err != nil {
			t.Error(err)
		}
		got <- a
	}()
	upsert(t, c, "d", `{}`, 0)
	select {
	case a := <-got:
		if len(a.Results) != 1 || a.Results[0].ID != "d" {
			t.Errorf("longpoll: %+v", a)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("longpoll did not answer a change")
	}
	// longpoll with nothing new ends at its timeout, at the same position.
	end = feed(t, b, "").LastSeq
	if a := feed(t, b, "feed=longpoll&timeout=10&since="+url.QueryEscape(end)); len(a.Results) != 0 || a.LastSeq != end {
		t.Errorf("longpoll timeout: %+v, want no rows at %s", a, end)
	}

	// continuous: a row per line, heartbeats as empty lines, a last_seq line
	// at the limit. The heartbeat keeps the feed open past its timeout, as
	// CouchDB's: it ends at the limit, once two more changes come.
	q, _ := url.ParseQuery("feed=continuous&timeout=1&heartbeat=20&limit=6")
	req, err := ParseRequest(q, nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := Open(b, engine.DefaultCollectionID, req)
	if err != nil {
		t.Fatal(err)
	}
	sink := &lockedSink{}
	ran := make(chan error, 1)
	go func() { ran <- f.Run(ctx, sink) }()
	for deadline := time.Now().Add(time.Minute); !strings.Contains(sink.String(), "\n\n"); { // wall clock: only to catch a hang
		select {
		case err := <-ran:
			t.Fatalf("continuous with a heartbeat ended before its limit (%v): %q", err, sink.String())
		default:
		}
		if time.Now().After(deadline) { // wall clock: only to catch a hang
			t.Fatalf("no heartbeat: %q", sink.String())
		}
		time.Sleep(time.Millisecond)
	}
	upsert(t, c, "e", `{}`, 0)
	upsert(t, c, "f", `{}`, 0)
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	out := sink.String()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	var ids []string
	for _, l := range lines[:len(lines)-1] {
		if l == "" {
			continue
		}
		var r row
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("continuous line %q: %v", l, err)
		}
		ids = append(ids, r.ID)
	}
	if len(ids) != 6 || !strings.HasPrefix(lines[len(lines)-1], `{"last_seq":"`) || !strings.Contains(out, "\n\n") {
		t.Errorf("continuous: %q", out)
	}

	// eventsource: data and id lines; the id is the row's seq.
	a = feed(t, b, "")
	out, err = run(ctx, b, "feed=eventsource&timeout=10&since="+url.QueryEscape(a.Results[0].Seq))
	if err != nil {
		t.Fatal(err)
	}
	events := strings.Split(strings.TrimSpace(out), "\n\n")
	if len(events) != 5 {
		t.Fatalf("eventsource: %q", out)
	}
	for _, e := range events {
		data, id, ok := strings.Cut(e, "\nid: ")
		var r row
		if !ok || !strings.HasPrefix(data, "data: ") || json.Unmarshal([]byte(strings.TrimPrefix(data, "data: ")), &r) != nil || r.Seq != id {
			t.Errorf("event %q", e)
		}
	}
}

// Expirations are deletion rows marked expired, whether the pager or a read
// found them; a client's delete is not.
func TestExpirationsAreEvents(t *testing.T) {
	_, b, clk := newBucket(t, t.TempDir())
	c := b.DefaultCollection()
	upsert(t, c, "paged", `{}`, 10)
	upsert(t, c, "lazy", `{}`, 10)
	upsert(t, c, "deleted", `{}`, 0)
	upsert(t, c, "kept", `{}`, 0)
	start := feed(t, b, "").LastSeq
	if _, err := c.Delete(context.Background(), "deleted", nil); err != nil {
		t.Fatal(err)
	}
	clk.Advance(11)
	// Expired, not yet purged: include_docs shows no body.
	a := feed(t, b, "include_docs=true")
	for _, r := range a.Results {
		if r.ID == "paged" && (r.Deleted || string(r.Doc) != "null") {
			t.Errorf("expired, unpurged: %+v", r)
		}
	}
	if _, err := c.Get(context.Background(), "lazy"); !errors.Is(err, engine.ErrExpired) {
		t.Fatalf("lazy read: %v", err)
	}
	if n, _, err := b.ExpireBatch(context.Background(), 100); err != nil || n != 1 {
		t.Fatalf("pager: %d, %v", n, err)
	}
	if err := b.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	a = feed(t, b, "include_docs=true&since="+url.QueryEscape(start))
	got := map[string]row{}
	for _, r := range a.Results {
		got[r.ID] = r
	}
	if len(got) != 3 {
		t.Fatalf("rows: %+v", a.Results)
	}
	for id, expired := range map[string]bool{"paged": true, "lazy": true, "deleted": false} {
		r := got[id]
		if !r.Deleted || r.Expired != expired || len(r.Changes) != 1 || !strings.HasPrefix(r.Changes[0].Rev, "2-") || !isTombstone(r) {
			t.Errorf("%s: %+v, want a deletion at revision 2, expired %v, with its tombstone as doc", id, r, expired)
		}
	}
}

// isTombstone reports whether a deletion row's doc is CouchDB's tombstone:
// {"_id","_rev","_deleted":true}, the row's id and rev and nothing else.
func isTombstone(r row) bool {
	var doc map[string]any
	if json.Unmarshal(r.Doc, &doc) != nil || len(r.Changes) != 1 {
		return false
	}
	return len(doc) == 3 && doc["_id"] == r.ID && doc["_rev"] == r.Changes[0].Rev && doc["_deleted"] == true
}

// A deletion's row with include_docs carries the tombstone, as CouchDB's
// does ({"_id","_rev","_deleted":true}), so that a client reading
// change.doc._deleted (PouchDB's documented shape) sees the deletion
// instead of failing on a null doc; in every mode.
func TestDeletionRowsCarryTheTombstone(t *testing.T) {
	_, b, _ := newBucket(t, t.TempDir())
	c := b.DefaultCollection()
	upsert(t, c, "gone", `{"secret":1}`, 0)
	upsert(t, c, "kept", `{"n":1}`, 0)
	if _, err := c.Delete(context.Background(), "gone", nil); err != nil {
		t.Fatal(err)
	}
	a := feed(t, b, "include_docs=true")
	if len(a.Results) != 2 {
		t.Fatalf("rows: %+v", a.Results)
	}
	for _, r := range a.Results {
		switch r.ID {
		case "gone":
			if !r.Deleted || !isTombstone(r) {
				t.Errorf("deleted row: deleted %v, doc %s; want the tombstone {\"_id\",\"_rev\",\"_deleted\":true}", r.Deleted, r.Doc)
			}
		case "kept":
			if r.Deleted || !strings.Contains(string(r.Doc), `"n":1`) || strings.Contains(string(r.Doc), "_deleted") {
				t.Errorf("live row: %+v", r)
			}
		}
	}
	out, err := run(context.Background(), b, "feed=continuous&timeout=0&include_docs=true")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, `"id":"gone"`) || !strings.Contains(out, `"_deleted":true}`) || strings.Contains(out, "secret") {
		t.Errorf("continuous: %q, want the deleted row's tombstone", out)
	}
}

// A since from another history, or older than deletions the metadata purge
// removed, is refused; since=0 always works.
func TestLostPositions(t *testing.T) {
	dir := t.TempDir()
	eng, b, clk := newBucket(t, dir)
	c := b.DefaultCollection()
	upsert(t, c, "a", `{}`, 0)
	upsert(t, c, "b", `{}`, 0)
	first := feed(t, b, "limit=1").LastSeq
	old := feed(t, b, "").LastSeq

	if _, err := run(context.Background(), b, "since=bad"); !errors.Is(err, ErrBadRequest) {
		t.Errorf("since=bad: %v", err)
	}
	if _, err := c.Delete(context.Background(), "a", nil); err != nil {
		t.Fatal(err)
	}
	clk.Advance(100)
	if n, _, err := b.PurgeTombstones(context.Background(), clk.Now(), 10); err != nil || n != 1 {
		t.Fatalf("purge: %d, %v", n, err)
	}
	for _, since := range []string{old, first} {
		if _, err := run(context.Background(), b, "since="+url.QueryEscape(since)); !errors.Is(err, ErrRollback) || !strings.Contains(err.Error(), "purge") {
			t.Errorf("since before a purged deletion: %v", err)
		}
	}
	if a := feed(t, b, "since=0"); len(a.Results) != 1 || a.Results[0].ID != "b" {
		t.Errorf("since=0 after the purge: %+v", a)
	}
	upsert(t, c, "c", `{}`, 0)
	after := feed(t, b, "").LastSeq
	if a := feed(t, b, "since="+url.QueryEscape(after)); len(a.Results) != 0 {
		t.Errorf("since after the purge: %+v", a)
	}

	// The purge's mark survives a restart.
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	eng, b, _ = newBucket(t, dir)
	if _, err := run(context.Background(), b, "since="+url.QueryEscape(old)); !errors.Is(err, ErrRollback) {
		t.Errorf("since before a purged deletion, after a restart: %v", err)
	}
	if a := feed(t, b, "since="+url.QueryEscape(after)); len(a.Results) != 0 {
		t.Errorf("since after the purge, after a restart: %+v", a)
	}

	// A recreated bucket is another history.
	if err := eng.DeleteBucket(context.Background(), "b"); err != nil {
		t.Fatal(err)
	}
	if b, err := eng.CreateBucket(context.Background(), engine.BucketSettings{Name: "b", Type: engine.Couchbase}); err != nil {
		t.Fatal(err)
	} else if _, err := run(context.Background(), b, "since="+url.QueryEscape(after)); !errors.Is(err, ErrRollback) || !errors.Is(err, engine.ErrRollback) {
		t.Errorf("since from a deleted bucket: %v", err)
	}
}

// stallSink is a client that stops reading: its first write blocks until
// the context ends, as a write to a full socket blocks until the connection
// goes.
type stallSink struct {
	ctx     context.Context
	blocked chan int // the size of the blocked write
}

func (s *stallSink) Write(p []byte) (int, error) {
	s.blocked <- len(p)
	<-s.ctx.Done()
	return 0, s.ctx.Err()
}

func (*stallSink) Flush() error { return nil }

// A consumer that stops reading holds the feed at one buffer of bytes and
// one chunk of documents, however long the feed; when it goes, the feed
// ends.
func TestStalledConsumer(t *testing.T) {
	_, b, _ := newBucket(t, t.TempDir())
	c := b.DefaultCollection()
	value := `{"pad":"` + strings.Repeat("x", 1000) + `"}`
	const n = 2000 // about 2 MB of rows with include_docs
	for i := range n {
		upsert(t, c, fmt.Sprintf("k%d", i), value, 0)
	}
	req, err := ParseRequest(url.Values{"feed": {"continuous"}, "include_docs": {"true"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := Open(b, engine.DefaultCollectionID, req)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	sink := &stallSink{ctx: ctx, blocked: make(chan int, 1)}
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx, sink) }()
	var size int
	select {
	case size = <-sink.blocked:
	case <-time.After(30 * time.Second):
		t.Fatal("the feed never wrote")
	}
	read, sent := f.Progress()
	if size > bufferSize {
		t.Errorf("the blocked write holds %d bytes, the buffer is %d", size, bufferSize)
	}
	if sent >= n || read-sent > chunkSize {
		t.Errorf("blocked with %d rows written and %d documents read of %d: want fewer than all, at most a chunk (%d) ahead", sent, read, n, chunkSize)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Run after the client went: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the feed did not end when its client went")
	}
}

// A client that goes while the feed waits for changes ends it at once.
func TestClientGoesWhileWaiting(t *testing.T) {
	_, b, _ := newBucket(t, t.TempDir())
	req, err := ParseRequest(url.Values{"feed": {"continuous"}, "heartbeat": {"60000"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := Open(b, engine.DefaultCollectionID, req)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx, &bufSink{}) }()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the feed did not end when its client went")
	}
}

func TestBadRequests(t *testing.T) {
	for _, q := range []string{"feed=x", "limit=-1", "limit=x", "include_docs=yes", "timeout=x", "heartbeat=-5", "filter=app/f", "filter=_doc_ids", "descending=yes", "style=x", "filter=_doc_ids&doc_ids=x"} {
		v, _ := url.ParseQuery(q)
		if _, err := ParseRequest(v, nil); !errors.Is(err, ErrBadRequest) {
			t.Errorf("%s: %v", q, err)
		}
	}
	v := url.Values{"filter": {"_doc_ids"}}
	r, err := ParseRequest(v, []byte(`{"doc_ids":["a","b"]}`))
	if err != nil || len(r.DocIDs) != 2 {
		t.Errorf("doc_ids body: %+v %v", r, err)
	}
}

// TestHugeWaits: a timeout or heartbeat of any number of milliseconds is at
// least as long as a year (and long enough that the server's margins added
// to it do not overflow), never a wait wrapped round to a fraction of a
// millisecond or below zero.
func TestHugeWaits(t *testing.T) {
	const year = 365 * 24 * time.Hour
	for _, ms := range []string{"18446744073710", "9223372036854", "99999999999999999", "9223372036854775807"} {
		// Apart: a heartbeat overrides the timeout.
		rt, err := ParseRequest(url.Values{"feed": {"continuous"}, "timeout": {ms}}, nil)
		if err != nil {
			t.Fatalf("timeout=%s: %v", ms, err)
		}
		rh, err := ParseRequest(url.Values{"feed": {"continuous"}, "heartbeat": {ms}}, nil)
		if err != nil {
			t.Fatalf("heartbeat=%s: %v", ms, err)
		}
		for name, d := range map[string]time.Duration{"timeout": rt.Timeout, "heartbeat": rh.Heartbeat} {
			if d < year || d+time.Hour < d {
				t.Errorf("%s=%s ms: %v, want a wait of a year or more that an hour more does not overflow", name, ms, d)
			}
		}
	}
}
