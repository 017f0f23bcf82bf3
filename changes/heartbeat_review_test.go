package changes

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
)

// Bug (review of the change feed): a feed with a heartbeat sends none while
// the bucket is busy with changes the feed does not send (other documents
// than filter=_doc_ids names, another collection): each change wakes the
// feed, which reads a window with no row and starts its heartbeat's wait
// again from zero (wait's lastBeat). The client, which asked for a newline
// every 200 ms when nothing is sent (README: "heartbeat (ms: a newline when
// idle"), gets nothing at all for as long as others write, and a
// replicator's connection timeout (CouchDB's: 30 s, with heartbeats every
// 10 s) drops it. Here other documents are written without pause for 3 s;
// a heartbeat of 200 ms owes about 15 newlines, and the test asks for one.
func TestReviewHeartbeatWhileOthersWrite(t *testing.T) {
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
