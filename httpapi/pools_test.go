package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/httpapi"
)

// The bucket REST API speaks Couchbase's names where the SDKs' bucket
// managers read them: a couchbase bucket is "membase", a name taken and a
// missing bucket carry the texts gocb looks for in "errors".
func TestBucketRESTNames(t *testing.T) {
	f := newFixture(t)
	st, _, body := f.do("GET", "/pools/default/buckets/default", "", "")
	if st != 200 || jsonOf(t, body)["bucketType"] != "membase" {
		t.Fatalf("GET bucket: %d %s", st, body)
	}
	// gocb's CreateBucket sends bucketType=membase and fields Mayfly has no
	// use for (one node: no replicas); the bucket is a couchbase one.
	st, _, body = f.do("POST", "/pools/default/buckets", form,
		"name=b2&bucketType=membase&ramQuotaMB=100&flushEnabled=0&replicaIndex=1&replicaNumber=0&maxTTL=60&evictionPolicy=valueOnly")
	if st != 202 {
		t.Fatalf("create: %d %s", st, body)
	}
	if b := jsonOf(t, body); b["bucketType"] != "membase" || b["maxTTL"] != float64(60) || b["evictionPolicy"] != "valueOnly" {
		t.Fatalf("created %s", body)
	}
	// gocb's UpdateBucket of settings read back sends maxTTL twice: the
	// deprecated MaxTTL as read, then MaxExpiry as set. The last counts.
	st, _, body = f.do("POST", "/pools/default/buckets/b2", form, "name=b2&bucketType=membase&ramQuotaMB=100&maxTTL=60&maxTTL=120")
	if st != 200 || jsonOf(t, body)["maxTTL"] != float64(120) {
		t.Fatalf("update with maxTTL twice: %d %s", st, body)
	}
	st, _, body = f.do("POST", "/pools/default/buckets", form, "name=b2&bucketType=membase&ramQuotaMB=100")
	if st != 400 || !strings.Contains(strings.ToLower(body), "bucket with given name already exists") {
		t.Fatalf("create twice: %d %s", st, body)
	}
	st, _, body = f.do("GET", "/pools/default/buckets/nosuch", "", "")
	if st != 404 || !strings.Contains(strings.ToLower(body), "resource not found") || jsonOf(t, body)["error"] != "not_found" {
		t.Fatalf("missing bucket: %d %s", st, body)
	}
	st, _, body = f.do("POST", "/pools/default/buckets", form, "name=e&bucketType=ephemeral&ramQuotaMB=100")
	if st != 202 || jsonOf(t, body)["bucketType"] != "ephemeral" {
		t.Fatalf("ephemeral: %d %s", st, body)
	}
}

// A bucket's numVBuckets (Couchbase's, for magma buckets) is chosen when
// it is created and shown; out of range it is refused, and an update may
// repeat it but not change it.
func TestBucketNumVBuckets(t *testing.T) {
	f := newFixture(t)
	for _, bad := range []string{"0", "1025", "-3", "many"} {
		st, _, body := f.do("POST", "/pools/default/buckets", form, "name=v&ramQuotaMB=100&numVBuckets="+bad)
		if st != 400 || !strings.Contains(body, "numVBuckets") {
			t.Errorf("numVBuckets=%s: %d %s, want 400 naming numVBuckets", bad, st, body)
		}
	}
	st, _, body := f.do("POST", "/pools/default/buckets", form, "name=v&ramQuotaMB=100&numVBuckets=128")
	if st != 202 || jsonOf(t, body)["numVBuckets"] != float64(128) {
		t.Fatalf("create with numVBuckets=128: %d %s", st, body)
	}
	st, _, body = f.do("GET", "/pools/default/buckets/v", "", "")
	if st != 200 || jsonOf(t, body)["numVBuckets"] != float64(128) {
		t.Fatalf("GET: %d %s", st, body)
	}
	st, _, body = f.do("POST", "/pools/default/buckets/v", form, "ramQuotaMB=100&numVBuckets=1024")
	if st != 400 || !strings.Contains(body, "cannot be changed") {
		t.Fatalf("update to 1024: %d %s, want 400", st, body)
	}
	st, _, body = f.do("POST", "/pools/default/buckets/v", form, "ramQuotaMB=100&numVBuckets=128&maxTTL=30")
	if b := jsonOf(t, body); st != 200 || b["numVBuckets"] != float64(128) || b["maxTTL"] != float64(30) {
		t.Fatalf("update repeating numVBuckets: %d %s", st, body)
	}
}

// configStream reads a configuration stream's configurations.
type configStream struct {
	t    testing.TB
	resp *http.Response
	r    *bufio.Reader
}

func (f *fixture) openStream(path string) *configStream {
	f.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f.t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, "GET", f.srv.URL+path, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	req.SetBasicAuth(adminUser, adminPass)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		f.t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return &configStream{t: f.t, resp: resp, r: bufio.NewReader(resp.Body)}
}

// next reads the next configuration: the JSON before four newlines.
func (s *configStream) next() map[string]any {
	s.t.Helper()
	var buf []byte
	for !bytes.HasSuffix(buf, []byte("\n\n\n\n")) {
		c, err := s.r.ReadByte()
		if err != nil {
			s.t.Fatalf("stream after %q: %v", buf, err)
		}
		buf = append(buf, c)
	}
	var m map[string]any
	if err := json.Unmarshal(bytes.TrimSpace(buf), &m); err != nil {
		s.t.Fatalf("config %q: %v", buf, err)
	}
	return m
}

// The terse configuration stream sends the configuration at once and a new
// one when the collections manifest changes; the verbose one follows the
// bucket's settings too. A deleted bucket ends its streams.
func TestConfigStreams(t *testing.T) {
	f := newFixture(t)
	bs := f.openStream("/pools/default/bs/default")
	first := bs.next()
	if first["name"] != "default" || first["nodeLocator"] != "vbucket" {
		t.Fatalf("first config %v", first)
	}
	verbose := f.openStream("/pools/default/bucketsStreaming/default")
	if v := verbose.next(); v["maxTTL"] != float64(0) || v["bucketType"] != "membase" {
		t.Fatalf("first verbose config %v", v)
	}

	if st, _, body := f.do("POST", "/pools/default/buckets/default/scopes", form, "name=inventory"); st != 200 {
		t.Fatalf("create scope: %d %s", st, body)
	}
	second := bs.next()
	if second["rev"].(float64) <= first["rev"].(float64) || second["collectionsManifestUid"] == first["collectionsManifestUid"] {
		t.Fatalf("after a scope was made: %v, was %v", second, first)
	}
	if v := verbose.next(); v["collectionsManifestUid"] != second["collectionsManifestUid"] {
		t.Fatalf("verbose after a scope was made: %v", v)
	}
	if st, _, body := f.do("POST", "/pools/default/buckets/default", form, "maxTTL=90"); st != 200 {
		t.Fatalf("update: %d %s", st, body)
	}
	if v := verbose.next(); v["maxTTL"] != float64(90) {
		t.Fatalf("verbose after maxTTL=90: %v", v)
	}

	if st, _, body := f.do("DELETE", "/pools/default/buckets/default", "", ""); st != 200 {
		t.Fatalf("delete: %d %s", st, body)
	}
	done := make(chan error, 1)
	go func() { _, err := io.ReadAll(bs.r); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("stream of a deleted bucket: %v", err)
		}
	case <-time.After(time.Minute): // only a hang
		t.Fatal("the stream of a deleted bucket stayed open")
	}
}

// Streams are capped: one over MaxConfigStreams is answered 503, and a
// stream whose client went frees its place.
func TestConfigStreamCap(t *testing.T) {
	// One user opens them all: its own bound (MaxStreamsPerUser) is set
	// above the configuration streams'.
	f := newFixtureOpts(t, &httpapi.Options{MaxStreamsPerUser: httpapi.MaxConfigStreams + 1}, nil)
	streams := make([]*configStream, httpapi.MaxConfigStreams)
	for i := range streams {
		streams[i] = f.openStream("/pools/default/bs/default")
		streams[i].next()
	}
	if st, _, body := f.do("GET", "/pools/default/bs/default", "", ""); st != 503 {
		t.Fatalf("stream %d: %d %s", httpapi.MaxConfigStreams+1, st, body)
	}
	streams[0].resp.Body.Close()
	deadline := time.Now().Add(time.Minute) // only a hang
	for {
		req, _ := http.NewRequest("GET", f.srv.URL+"/pools/default/bs/default", nil)
		req.SetBasicAuth(adminUser, adminPass)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		st := resp.StatusCode
		resp.Body.Close()
		if st == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a closed stream did not free its place: %d", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
