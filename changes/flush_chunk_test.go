package changes

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// flushCountSink counts the rows written before each Flush.
type flushCountSink struct {
	bufSink
	flushes []int // rows (newline-separated lines) written at each flush
}

func (s *flushCountSink) Flush() error {
	s.flushes = append(s.flushes, strings.Count(s.String(), "\n"))
	return nil
}

// A feed flushes after each chunk of rows, as the package says (doc.go:
// "writes them through a 32 KiB buffer, flushing after each chunk"), in
// every mode, inside one window too: over HTTP the flush is what moves the
// connection's write deadline on (httpapi's responseSink), so a long answer
// that keeps sending outlives --write-timeout (see
// httpapi.TestChangesLongWindowOutlivesWriteTimeout). A review found a
// window's rows were flushed only once the whole window was written.
func TestFlushAfterEachChunk(t *testing.T) {
	_, b, _ := newBucket(t, t.TempDir())
	c := b.DefaultCollection()
	const n = 10 * chunkSize
	for i := range n {
		upsert(t, c, fmt.Sprintf("k%04d", i), `{}`, 0)
	}
	for _, mode := range []string{"normal", "continuous"} {
		req, err := ParseRequest(url.Values{"feed": {mode}, "timeout": {"0"}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		f, err := Open(b, engine.DefaultCollectionID, req)
		if err != nil {
			t.Fatal(err)
		}
		var sink flushCountSink
		if err := f.Run(context.Background(), &sink); err != nil {
			t.Fatal(err)
		}
		// Before the last row is written, the rows of every chunk but the
		// last must have been flushed.
		flushedBeforeEnd := 0
		for _, rows := range sink.flushes {
			if rows < n {
				flushedBeforeEnd++
			}
		}
		if flushedBeforeEnd < n/chunkSize-1 {
			t.Errorf("feed=%s: %d rows in one window flushed %d times before the last row (at rows %v); want a flush after each chunk of %d", mode, n, flushedBeforeEnd, sink.flushes, chunkSize)
		}
	}
}
