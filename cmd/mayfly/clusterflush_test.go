package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/httpapi"
)

// leaderlessReplicator is an engine.Replicator of one node's copy that
// leads every partition but those held: a held partition has no leader
// (as one whose group lost its quorum), so every write to it, the flush's
// deletions included, is refused, until it is released. Entries are
// applied here at once, each partition's numbered from 1.
type leaderlessReplicator struct {
	b *engine.Bucket

	heldMu sync.Mutex
	held   map[int]bool

	applyMu sync.Mutex // one entry applied at a time, in index order
	next    map[int]uint64
}

func (r *leaderlessReplicator) hold(part int, held bool) {
	r.heldMu.Lock()
	defer r.heldMu.Unlock()
	r.held[part] = held
}

// Leads is engine.PartitionLeader's.
func (r *leaderlessReplicator) Leads(part int) bool {
	r.heldMu.Lock()
	defer r.heldMu.Unlock()
	return !r.held[part]
}

func (r *leaderlessReplicator) Writable(_ context.Context, part int) error {
	if !r.Leads(part) {
		return fmt.Errorf("%w: partition %d has no leader", engine.ErrNotMyVBucket, part)
	}
	return nil
}

func (r *leaderlessReplicator) Replicate(ctx context.Context, part int, entry []byte) (engine.ReplicatedResult, error) {
	if err := r.Writable(ctx, part); err != nil {
		return engine.ReplicatedResult{}, err
	}
	r.applyMu.Lock()
	defer r.applyMu.Unlock()
	r.next[part]++
	return r.b.ApplyReplicated(part, r.next[part], entry)
}

// TestClusterFlushNotFinishedInTimeAnswers503: a cluster flush one of
// whose partitions has no leader cannot finish; once the flush's wait
// (flushWait, shortened here) has passed, doFlush answers what Couchbase
// answers a flush that failed, which test suites retry on: an HTTP error
// (503 here: the flush goes on) whose "_" is "Flush failed with unexpected
// error. Check server logs for details.", with temporary_failure. The
// flush goes on in the background: the partitions with a leader are
// flushed, the leaderless one's document is kept. Asked again once the
// partition has a leader, doFlush answers 200 and the bucket is empty.
// One node in process: its etcd holds the flush record, clusterDefs
// mirrors it and runs the flush through the bucket's engine.
func TestClusterFlushNotFinishedInTimeAnswers503(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	node, _ := oneNodeCluster(t, ctx)

	eng, err := engine.Open(t.TempDir(), &engine.Options{NumPartitions: 8, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	settings := engine.DefaultBucketSettings("default")
	settings.FlushEnabled = true
	b, err := eng.CreateBucket(ctx, settings)
	if err != nil {
		t.Fatal(err)
	}
	repl := &leaderlessReplicator{b: b, held: map[int]bool{}, next: map[int]uint64{}}
	b.SetReplicator(repl)

	defs := startClusterDefs(node.Client(), eng, nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer defs.Close()
	setFlushWait := func(d time.Duration) {
		defs.flushMu.Lock()
		defs.flushWait = d
		defs.flushMu.Unlock()
	}
	srv := httptest.NewServer(httpapi.New(eng, &httpapi.Options{Auth: testUsers(t), Flusher: defs}))
	defer srv.Close()
	req := func(method, path, body string) (int, string) {
		t.Helper()
		r, err := http.NewRequestWithContext(ctx, method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		r.SetBasicAuth(adminUser, adminPass)
		if method == http.MethodPost {
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(data)
	}
	const flush = "/pools/default/buckets/default/controller/doFlush"

	// Documents in every partition; then the first one's partition loses
	// its leader.
	var keys []string
	for i := range 24 {
		key := fmt.Sprintf("k%d", i)
		if code, body := req(http.MethodPut, "/default/docs/"+key, `{"v":1}`); code/100 != 2 {
			t.Fatalf("PUT %s: %d %s", key, code, body)
		}
		keys = append(keys, key)
	}
	held := b.PartitionOf(keys[0])
	var others []string
	for _, key := range keys {
		if b.PartitionOf(key) != held {
			others = append(others, key)
		}
	}
	if len(others) == 0 {
		t.Fatalf("every key is in partition %d", held)
	}
	repl.hold(held, true)

	setFlushWait(time.Second)
	code, body := req(http.MethodPost, flush, "")
	var answer map[string]string
	if code != http.StatusServiceUnavailable || json.Unmarshal([]byte(body), &answer) != nil {
		t.Fatalf("doFlush with partition %d leaderless: %d %s; want 503 with a JSON body", held, code, body)
	}
	if answer["_"] != "Flush failed with unexpected error. Check server logs for details." || answer["error"] != "temporary_failure" {
		t.Fatalf("doFlush with partition %d leaderless: %s; want Couchbase's failed-flush text and temporary_failure", held, body)
	}
	// It goes on: the partitions with a leader are flushed; the one
	// without keeps its document.
	eventuallyT(t, "the flush going on in the background", func() error {
		for _, key := range others {
			if code, body := req(http.MethodGet, "/default/docs/"+key, ""); code != http.StatusNotFound {
				return fmt.Errorf("%s: %d %s", key, code, body)
			}
		}
		return nil
	})
	if code, body := req(http.MethodGet, "/default/docs/"+keys[0], ""); code != http.StatusOK {
		t.Fatalf("%s, in the leaderless partition: %d %s; want it kept", keys[0], code, body)
	}

	// The partition has a leader again: asked again, the flush answers
	// 200, every document gone. (The wait is long again: what this
	// asserts is the answer, not how soon it comes.)
	repl.hold(held, false)
	setFlushWait(flushWait)
	if code, body := req(http.MethodPost, flush, ""); code != http.StatusOK {
		t.Fatalf("doFlush again once every partition has a leader: %d %s; want 200", code, body)
	}
	for _, key := range keys {
		if code, body := req(http.MethodGet, "/default/docs/"+key, ""); code != http.StatusNotFound {
			t.Errorf("%s after the flush: %d %s; want 404", key, code, body)
		}
	}
	code, body = req(http.MethodGet, "/pools/default/buckets/default", "")
	if code != http.StatusOK || !strings.Contains(body, `"itemCount":0`) {
		t.Fatalf("the bucket after the flush: %d %.300s; want itemCount 0", code, body)
	}
}
