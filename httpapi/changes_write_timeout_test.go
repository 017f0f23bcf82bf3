package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// A _changes answer that takes longer to send than the server's write
// timeout (--write-timeout, 10 min by default; here 1 s) but keeps making
// progress is sent whole: the feed sends its head at once and flushes after
// each chunk, and each flush moves the connection's write deadline on
// (responseSink.Flush), so only "a write that makes no progress for 2
// minutes" (README) ends it. A review found such an answer was cut
// mid-stream, the feed flushing only at a window's end. The client here
// waits 3 s before it reads (as a slow link would), then reads everything.
func TestChangesLongWindowOutlivesWriteTimeout(t *testing.T) {
	var handler http.Handler
	f := newFixtureWrapped(t, nil, nil, nil, func(h http.Handler) http.Handler { handler = h; return h })
	srv := httptest.NewUnstartedServer(handler)
	srv.Config.WriteTimeout = time.Second
	srv.Start()
	t.Cleanup(srv.Close)

	b, err := f.eng.Bucket("default")
	if err != nil {
		t.Fatal(err)
	}
	c := b.DefaultCollection()
	pad := strings.Repeat("x", 4000)
	const n = 3000 // about 12 MB of rows with include_docs: far more than the sockets buffer
	for i := range n {
		if _, err := c.Upsert(context.Background(), fmt.Sprintf("k%05d", i), []byte(`{"pad":"`+pad+`"}`), nil); err != nil {
			t.Fatal(err)
		}
	}
	req, err := http.NewRequestWithContext(context.Background(), "GET", srv.URL+"/default/_changes?include_docs=true", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(adminUser, adminPass)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	time.Sleep(3 * time.Second) // wall clock: a slow client, past the server's write timeout
	body, err := io.ReadAll(resp.Body)
	var a changesAnswer
	if jerr := json.Unmarshal(body, &a); err != nil || jerr != nil || len(a.Results) != n {
		t.Fatalf("the answer, read slowly: %d bytes, read error %v, JSON error %v, %d rows of %d", len(body), err, jerr, len(a.Results), n)
	}
}
