package changes

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
)

// A feed with a heartbeat sends one whenever nothing has been sent for that
// long (README: "heartbeat (ms: a newline when idle"), also while the
// bucket is busy with changes the feed does not send (other documents than
// filter=_doc_ids names, another collection), so a replicator's connection
// timeout (CouchDB's: 30 s, with heartbeats every 10 s) does not drop it. A
// review found it sent none at all while others wrote: each of their
// changes woke the feed, which read a window with no row and started its
// heartbeat's wait again from zero. Here other documents are written
// without pause for 3 s; a heartbeat of 200 ms owes about 15 newlines, and
// the test asks for one.
func TestHeartbeatWhileOthersWrite(t *testing.T) {
	_, b, _ := newBucket(t, t.TempDir())
	c := b.DefaultCollection()
	q, err := url.ParseQuery(`feed=continuous&heartbeat=200&filter=_doc_ids&doc_ids=["watched"]&since=now`)
	if err != nil {
		t.Fatal(err)
	}
	req, err := ParseRequest(q, nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := Open(b, engine.DefaultCollectionID, req)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var sink lockedSink
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx, &sink) }()
	end := time.Now().Add(3 * time.Second)    // wall clock: how long others write
	for i := 0; time.Now().Before(end); i++ { // wall clock: how long others write
		upsert(t, c, fmt.Sprintf("other%d", i%100), `{}`, 0)
	}
	cancel()
	<-done
	if n := strings.Count(sink.String(), "\n"); n == 0 {
		t.Errorf("no heartbeat in 3 s of a 200 ms heartbeat while other documents were written")
	}
}

// A heartbeat also goes out while the feed reads the bucket, not only while
// it waits for a change: a long scan (a filter over a large bucket, a
// backfill from disk) sends a newline, JSON whitespace between a normal
// answer's rows, whenever nothing has been sent for the heartbeat's period.
// A review found heartbeats were sent only while waiting. Here the scan is
// held (keepHook) until a heartbeat has come, or 30 s have passed.
func TestHeartbeatWhileScanning(t *testing.T) {
	_, b, _ := newBucket(t, t.TempDir())
	upsert(t, b.DefaultCollection(), "a", `{}`, 0)
	req, err := ParseRequest(url.Values{"heartbeat": {"10"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := Open(b, engine.DefaultCollectionID, req)
	if err != nil {
		t.Fatal(err)
	}
	const head = "{\"results\":[\n"
	var sink lockedSink
	beat, held := false, false
	f.keepHook = func() {
		if held {
			return
		}
		held = true
		for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) { // wall clock: only to end a hang
			if s := sink.String(); len(s) > len(head) {
				beat = strings.TrimSpace(s[len(head):]) == ""
				return
			}
		}
	}
	if err := f.Run(context.Background(), &sink); err != nil {
		t.Fatal(err)
	}
	if !beat {
		t.Errorf("no heartbeat while the scan was held: %q", sink.String())
	}
	var a answer
	if err := json.Unmarshal([]byte(sink.String()), &a); err != nil || len(a.Results) != 1 || a.Results[0].ID != "a" {
		t.Errorf("the answer with heartbeats in it: %v %q", err, sink.String())
	}
}
