package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// apiReq sends an administrator's request with a JSON body to node n and
// returns the status, the body and the X-Couchbase-Meta header.
func apiReq(n *procNode, method, path, body string) (int, string, string, error) {
	req, err := http.NewRequest(method, "http://"+n.http+path, strings.NewReader(body))
	if err != nil {
		return 0, "", "", err
	}
	req.SetBasicAuth("Administrator", "password")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	cl := http.Client{Timeout: time.Minute}
	resp, err := cl.Do(req)
	if err != nil {
		return 0, "", "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header.Get("X-Couchbase-Meta"), err
}

// sameScopes waits until every node lists the default bucket's scopes and
// collections (names, collection IDs, manifest UID) as one answer that
// holds each of want ("scope.collection") and none of unwanted.
func sameScopes(t *testing.T, nodes []*procNode, want, unwanted []string) {
	t.Helper()
	var first string
	for _, n := range nodes {
		eventuallyT(t, n.name+" lists the same scopes and collections", func() error {
			code, body, _, err := apiReq(n, http.MethodGet, "/pools/default/buckets/default/scopes", "")
			if err != nil || code != http.StatusOK {
				return fmt.Errorf("%d %s %v", code, body, err)
			}
			var m struct {
				Scopes []struct {
					Name        string `json:"name"`
					Collections []struct {
						Name string `json:"name"`
					} `json:"collections"`
				} `json:"scopes"`
			}
			if err := json.Unmarshal([]byte(body), &m); err != nil {
				return err
			}
			have := map[string]bool{}
			for _, sc := range m.Scopes {
				for _, c := range sc.Collections {
					have[sc.Name+"."+c.Name] = true
				}
			}
			for _, w := range want {
				if !have[w] {
					return fmt.Errorf("no %s in %s", w, body)
				}
			}
			for _, u := range unwanted {
				if have[u] {
					return fmt.Errorf("%s still in %s", u, body)
				}
			}
			if first != "" && body != first {
				return fmt.Errorf("%s, another node's %s", body, first)
			}
			first = body
			return nil
		})
	}
}

// ddocOn is a design document as node n answers it: its body and _rev.
func ddocOn(n *procNode, name string) (code int, body, rev string, err error) {
	code, body, meta, err := apiReq(n, http.MethodGet, "/default/_design/"+name, "")
	if err != nil || code != http.StatusOK {
		return code, body, "", err
	}
	var m struct {
		Rev string `json:"rev"`
	}
	if err := json.Unmarshal([]byte(meta), &m); err != nil {
		return code, body, "", fmt.Errorf("X-Couchbase-Meta %q: %w", meta, err)
	}
	return code, body, m.Rev, nil
}

// hasDDoc waits until every node answers design document name with body
// and the same _rev, and returns that _rev.
func hasDDoc(t *testing.T, nodes []*procNode, name, body string) string {
	t.Helper()
	var want string
	for _, n := range nodes {
		eventuallyT(t, n.name+" answers _design/"+name, func() error {
			code, got, rev, err := ddocOn(n, name)
			switch {
			case err != nil:
				return err
			case code != http.StatusOK || got != body:
				return fmt.Errorf("%d %s", code, got)
			case want != "" && rev != want:
				return fmt.Errorf("_rev %s, another node's %s", rev, want)
			}
			want = rev
			return nil
		})
	}
	return want
}

// lacksDDoc waits until every node answers design document name 404.
func lacksDDoc(t *testing.T, nodes []*procNode, name string) {
	t.Helper()
	for _, n := range nodes {
		eventuallyT(t, n.name+" has no _design/"+name, func() error {
			if code, body, _, err := ddocOn(n, name); err != nil || code != http.StatusNotFound {
				return fmt.Errorf("%d %s %v", code, body, err)
			}
			return nil
		})
	}
}

// searchUUID is the uuid node n answers for full-text index name ("" and
// the status when it has none).
func searchUUID(n *procNode, name string) (int, string, error) {
	code, body, _, err := apiReq(n, http.MethodGet, "/api/index/"+name, "")
	if err != nil || code != http.StatusOK {
		return code, body, err
	}
	var d struct {
		IndexDef struct {
			UUID string `json:"uuid"`
		} `json:"indexDef"`
	}
	if err := json.Unmarshal([]byte(body), &d); err != nil {
		return code, "", err
	}
	return code, d.IndexDef.UUID, nil
}

// startDefsCluster starts three cluster nodes on loopback (stopped when
// the test ends).
func startDefsCluster(t *testing.T) []*procNode {
	t.Helper()
	nodes, _ := procCluster(t, "--memcached", "127.0.0.1:0", "--kv", "")
	for _, n := range nodes {
		n.start(t)
	}
	for _, n := range nodes {
		n.started(t)
	}
	return nodes
}

// TestClusterDefinitionsAgreeOnEveryNode: a design document PUT on one node
// of three is answered by every node with the same body and _rev, and its
// view gives the same rows everywhere; a search index's uuid is the same
// everywhere; a design document refused by the node asked is written
// nowhere; a scope and a collection made on two nodes are listed by every
// node with the same IDs; a DELETE on another node removes it everywhere; and a node
// stopped while a definition changed applies the change when it starts
// again.
func TestClusterDefinitionsAgreeOnEveryNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three server processes")
	}
	// Beside the package's other cluster tests: it mostly waits out
	// elections and timeouts, and this package is make test's longest.
	t.Parallel()
	nodes := startDefsCluster(t)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]

	// A design document PUT on n1: every node answers it, same _rev.
	const dd = `{"views":{"byv":{"map":"function(doc, meta){ emit(doc.v, meta.id); }"}}}`
	began := time.Now()
	if code, body, _, err := apiReq(n1, http.MethodPut, "/default/_design/dd", dd); err != nil || code != http.StatusCreated {
		t.Fatalf("PUT _design/dd on n1: %d %s %v", code, body, err)
	}
	answered := time.Since(began)
	rev := hasDDoc(t, nodes, "dd", dd)
	t.Logf("PUT _design/dd answered in %v; every node answered it %v after the PUT began (logged, never asserted)", answered, time.Since(began))
	if !strings.HasPrefix(rev, "1-") {
		t.Fatalf("_rev %s, want the first version's (1-...)", rev)
	}

	// Its view answers the same rows on every node once the documents
	// written are indexed there.
	for i := range 3 {
		writeAnywhere(t, nodes, http.MethodPut, fmt.Sprintf("d%d", i), fmt.Sprintf(`{"v":%d}`, i))
	}
	const rows = `[{"id":"d0","key":0,"value":"d0"},{"id":"d1","key":1,"value":"d1"},{"id":"d2","key":2,"value":"d2"}]`
	for _, n := range nodes {
		eventuallyT(t, n.name+" answers the view's rows", func() error {
			code, body, _, err := apiReq(n, http.MethodGet, "/default/_design/dd/_view/byv?stale=false", "")
			if err != nil || code != http.StatusOK {
				return fmt.Errorf("%d %s %v", code, body, err)
			}
			var res struct {
				Rows json.RawMessage `json:"rows"`
			}
			if err := json.Unmarshal([]byte(body), &res); err != nil {
				return err
			}
			if got := strings.Join(strings.Fields(string(res.Rows)), ""); got != rows {
				return fmt.Errorf("rows %s, want %s", got, rows)
			}
			return nil
		})
	}

	// A design document n2 refuses is written nowhere.
	if code, body, _, err := apiReq(n2, http.MethodPut, "/default/_design/bad", `{"views":{"v":{"map":"function(doc){ emit("}}}`); err != nil || code != http.StatusBadRequest {
		t.Fatalf("PUT a design document that does not compile on n2: %d %s %v, want 400", code, body, err)
	}

	// A search index PUT on n2: the same uuid on every node.
	code, body, _, err := apiReq(n2, http.MethodPut, "/api/index/fts", `{"type":"fulltext-index","sourceType":"couchbase","sourceName":"default"}`)
	if err != nil || code != http.StatusOK {
		t.Fatalf("PUT /api/index/fts on n2: %d %s %v", code, body, err)
	}
	var put struct {
		UUID string `json:"uuid"`
	}
	if err := json.Unmarshal([]byte(body), &put); err != nil || put.UUID == "" {
		t.Fatalf("PUT /api/index/fts answered %s", body)
	}
	for _, n := range nodes {
		eventuallyT(t, n.name+" has index fts with n2's uuid", func() error {
			if code, uuid, err := searchUUID(n, "fts"); err != nil || uuid != put.UUID {
				return fmt.Errorf("%d uuid %q %v, want %s", code, uuid, err, put.UUID)
			}
			return nil
		})
	}
	lacksDDoc(t, nodes, "bad")

	// A scope made on n1, a collection in it on n2: every node lists them
	// with the same collection ID (the KV protocol carries it) and
	// manifest UID.
	if code, body, err := bucketReq(n1, http.MethodPost, "/pools/default/buckets/default/scopes", url.Values{"name": {"s1"}}); err != nil || code != http.StatusOK {
		t.Fatalf("creating scope s1 on n1: %d %s %v", code, body, err)
	}
	if code, body, err := bucketReq(n2, http.MethodPost, "/pools/default/buckets/default/scopes/s1/collections", url.Values{"name": {"c1"}}); err != nil || code != http.StatusOK {
		t.Fatalf("creating collection s1.c1 on n2: %d %s %v", code, body, err)
	}
	if code, body, err := bucketReq(n3, http.MethodPost, "/pools/default/buckets/default/scopes/s1/collections", url.Values{"name": {"c1"}}); err != nil || code != http.StatusBadRequest {
		t.Fatalf("creating s1.c1 again on n3: %d %s %v, want 400 (it exists)", code, body, err)
	}
	sameScopes(t, nodes, []string{"_default._default", "s1.c1"}, nil)

	// DELETE on n3: gone everywhere.
	if code, body, _, err := apiReq(n3, http.MethodDelete, "/default/_design/dd", ""); err != nil || code != http.StatusOK {
		t.Fatalf("DELETE _design/dd on n3: %d %s %v", code, body, err)
	}
	lacksDDoc(t, nodes, "dd")

	// n2 stops; meanwhile dd is created again, dd2 created, fts deleted.
	// Started again, n2 has the same as the others.
	n2.stop()
	if code, body, _, err := apiReq(n1, http.MethodPut, "/default/_design/dd", dd); err != nil || code != http.StatusCreated {
		t.Fatalf("PUT _design/dd again on n1: %d %s %v", code, body, err)
	}
	const dd2 = `{"views":{"all":{"map":"function(doc, meta){ emit(meta.id, null); }","reduce":"_count"}}}`
	if code, body, _, err := apiReq(n3, http.MethodPut, "/default/_design/dd2", dd2); err != nil || code != http.StatusCreated {
		t.Fatalf("PUT _design/dd2 on n3: %d %s %v", code, body, err)
	}
	if code, body, _, err := apiReq(n1, http.MethodDelete, "/api/index/fts", ""); err != nil || code != http.StatusOK {
		t.Fatalf("DELETE /api/index/fts on n1: %d %s %v", code, body, err)
	}
	if code, body, err := bucketReq(n3, http.MethodPost, "/pools/default/buckets/default/scopes/s1/collections", url.Values{"name": {"c2"}}); err != nil || code != http.StatusOK {
		t.Fatalf("creating collection s1.c2 on n3: %d %s %v", code, body, err)
	}
	if code, body, _, err := apiReq(n1, http.MethodDelete, "/pools/default/buckets/default/scopes/s1/collections/c1", ""); err != nil || code != http.StatusOK {
		t.Fatalf("dropping s1.c1 on n1: %d %s %v", code, body, err)
	}
	n2.start(t)
	n2.started(t)
	again := hasDDoc(t, nodes, "dd", dd)
	if !strings.HasPrefix(again, "3-") {
		t.Fatalf("_rev %s after put, delete, put; want 3-... (versions count on through a delete)", again)
	}
	hasDDoc(t, nodes, "dd2", dd2)
	sameScopes(t, nodes, []string{"_default._default", "s1.c2"}, []string{"s1.c1"})
	for _, n := range nodes {
		eventuallyT(t, n.name+" has no index fts", func() error {
			// Couchbase's search service answers a missing index 400.
			if code, body, err := searchUUID(n, "fts"); err != nil || code != http.StatusBadRequest || !strings.Contains(body, "not found") {
				return fmt.Errorf("%d %s %v", code, body, err)
			}
			return nil
		})
	}
}

// docMetaOn reads key's metadata from node n's copy.
func docMetaOn(n *procNode, key string) (exp, ts int64, cas, seq uint64, err error) {
	code, body, err := getDoc(n.http, key+"?meta=true")
	if err != nil {
		return 0, 0, 0, 0, err
	}
	var env struct {
		Meta struct {
			Expiration int64  `json:"expiration"`
			TS         int64  `json:"ts"`
			CAS        uint64 `json:"cas"`
			Seq        uint64 `json:"seq"`
		} `json:"meta"`
	}
	if code != http.StatusOK {
		return 0, 0, 0, 0, fmt.Errorf("%s: %s reads %d %s", n.name, key, code, body)
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return 0, 0, 0, 0, err
	}
	return env.Meta.Expiration, env.Meta.TS, env.Meta.CAS, env.Meta.Seq, nil
}

// TestClusterCollectionTTLSettings: a collection's defaultTTL set on one
// node of three is every node's (each lists it), and every node's copy of
// the collection's documents gets the expiration the setting derives,
// with the same CAS and sequence number everywhere (each partition's
// leader re-evaluated it, as replicated writes); removing it on another
// node lifts those expirations everywhere. Set again while a node is
// frozen, the partitions that node led, leaderless when the others applied
// the change, are re-evaluated by their next leaders without a re-run.
// Then, on the same cluster, a flush: refused (400) without flushEnabled,
// with it doFlush on one node answers 200 once every document is gone on
// every node (each node's GET 404, itemCount 0 everywhere), and a write
// after it is kept.
func TestClusterCollectionTTLSettings(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three server processes")
	}
	t.Parallel()
	nodes := startDefsCluster(t)
	n1, n2 := nodes[0], nodes[1]
	ttls := map[string]int64{}
	for i := range 12 { // keys in partitions led by different nodes, likely
		key := fmt.Sprintf("d%d", i)
		writeAnywhere(t, nodes, http.MethodPut, key, `{"v":1}`)
		ttls[key] = 3600
	}
	writeAnywhere(t, nodes, http.MethodPut, "own", `{"v":2,"ttl":500}`)
	ttls["own"] = 500

	const path = "/pools/default/buckets/default/scopes/_default/collections/_default"
	code, body, err := bucketReq(n1, http.MethodPost, path, url.Values{"defaultTTL": {"3600"}})
	if err != nil || code != http.StatusOK || !strings.Contains(body, `"defaultTTL":3600`) {
		t.Fatalf("setting defaultTTL on n1: %d %s %v", code, body, err)
	}
	t.Logf("n1 answered %s", body)
	settingsEverywhere := func(want string) {
		t.Helper()
		for _, n := range nodes {
			eventuallyT(t, n.name+" lists _default's settings", func() error {
				code, body, _, err := apiReq(n, http.MethodGet, "/pools/default/buckets/default/scopes", "")
				if err != nil || code != http.StatusOK {
					return fmt.Errorf("%d %s %v", code, body, err)
				}
				if !strings.Contains(body, want) {
					return fmt.Errorf("%s, want %s", body, want)
				}
				return nil
			})
		}
	}
	settingsEverywhere(`"defaultTTL":3600`)
	sameScopes(t, nodes, []string{"_default._default"}, nil)
	expirationsOn := func(nodes []*procNode, rule func(key string, ts int64) int64) {
		t.Helper()
		for key := range ttls {
			eventuallyT(t, key+" has the derived expiration on every node", func() error {
				var cas0, seq0 uint64
				for i, n := range nodes {
					exp, ts, cas, seq, err := docMetaOn(n, key)
					if err != nil {
						return err
					}
					if want := rule(key, ts); exp != want {
						return fmt.Errorf("%s: %s expires at %d, want %d (meta.ts %d)", n.name, key, exp, want, ts)
					}
					if i == 0 {
						cas0, seq0 = cas, seq
					} else if cas != cas0 || seq != seq0 {
						return fmt.Errorf("%s: %s cas %d seq %d, n1's cas %d seq %d", n.name, key, cas, seq, cas0, seq0)
					}
				}
				return nil
			})
		}
	}
	expirations := func(rule func(key string, ts int64) int64) {
		t.Helper()
		expirationsOn(nodes, rule)
	}
	expirations(func(key string, ts int64) int64 { return ts + ttls[key] })

	// Removed on n2: the TTL rule's expirations are lifted everywhere.
	if code, body, err := bucketReq(n2, http.MethodPost, path, url.Values{"defaultTTL": {"null"}}); err != nil || code != http.StatusOK {
		t.Fatalf("removing defaultTTL on n2: %d %s %v", code, body, err)
	}
	for _, n := range nodes {
		eventuallyT(t, n.name+" lists _default without defaultTTL", func() error {
			_, body, _, err := apiReq(n, http.MethodGet, "/pools/default/buckets/default/scopes", "")
			if err != nil || strings.Contains(body, `"defaultTTL"`) {
				return fmt.Errorf("%s %v", body, err)
			}
			return nil
		})
	}
	expirations(func(string, int64) int64 { return 0 })

	// Set again while n3 is frozen (SIGSTOP: alive and silent, as a node
	// cut off). n1 and n2 apply the change while the partitions n3 led
	// have no leader they can reach; a few seconds later those partitions
	// elect one of them, which catches the partition up.
	thaw := freeze(t, nodes[2])
	// n3 may be etcd's leader: until n1 and n2 elect another (about a
	// second), a write is answered 503 "try again" (etcd's request timed
	// out, and may or may not have been applied), which a client retries,
	// as this one does.
	eventuallyT(t, "setting defaultTTL on n1 with n3 frozen", func() error {
		code, body, err := bucketReq(n1, http.MethodPost, path, url.Values{"defaultTTL": {"7200"}})
		if err == nil && code == http.StatusServiceUnavailable && strings.Contains(body, "temporary_failure") {
			return fmt.Errorf("%d %s", code, body)
		}
		if err != nil || code != http.StatusOK {
			t.Fatalf("setting defaultTTL on n1 with n3 frozen: %d %s %v", code, body, err)
		}
		return nil
	})
	for key := range ttls {
		if key != "own" {
			ttls[key] = 7200
		}
	}
	expirationsOn(nodes[:2], func(key string, ts int64) int64 { return ts + ttls[key] })
	thaw()
	expirations(func(key string, ts int64) int64 { return ts + ttls[key] })

	flushEverywhere(t, nodes, ttls)
}

// readRetrying reads key through n as a client does: a 503 "retry
// shortly" (a partition electing its leader, as just after a node was
// frozen and thawed) is asked again until another answer comes.
func readRetrying(t *testing.T, n *procNode, key string) (code int, body string, err error) {
	t.Helper()
	eventuallyT(t, "reading "+key+" on "+n.name, func() error {
		code, body, _, err = apiReq(n, http.MethodGet, "/default/docs/"+key, "")
		if err == nil && code == http.StatusServiceUnavailable {
			return fmt.Errorf("%d %s", code, body)
		}
		return nil
	})
	return code, body, err
}

// flushEverywhere is TestClusterCollectionTTLSettings's flush step: keys
// are the documents the default bucket holds.
func flushEverywhere(t *testing.T, nodes []*procNode, keys map[string]int64) {
	t.Helper()
	const flush = "/pools/default/buckets/default/controller/doFlush"
	if code, body, err := bucketReq(nodes[1], http.MethodPost, flush, url.Values{}); err != nil || code != http.StatusBadRequest ||
		!strings.Contains(body, "Flush is disabled for the bucket") {
		t.Fatalf("doFlush without flushEnabled: %d %s %v", code, body, err)
	}
	if code, body, err := bucketReq(nodes[0], http.MethodPost, "/pools/default/buckets/default", url.Values{"flushEnabled": {"1"}}); err != nil || code != http.StatusOK {
		t.Fatalf("setting flushEnabled on n1: %d %s %v", code, body, err)
	}
	for key := range keys {
		if code, body, err := readRetrying(t, nodes[2], key); err != nil || code != http.StatusOK {
			t.Fatalf("%s before the flush, on n3: %d %s %v", key, code, body, err)
		}
	}
	// Every node has flushEnabled once it applied the bucket's settings;
	// n2 refuses until then, and a flush not finished in time answers 503
	// (it goes on): a client retries both.
	eventuallyT(t, "doFlush on n2", func() error {
		code, body, err := bucketReq(nodes[1], http.MethodPost, flush, url.Values{})
		switch {
		case err == nil && code == http.StatusOK:
			return nil
		case err == nil && (code == http.StatusBadRequest && strings.Contains(body, "Flush is disabled") ||
			code == http.StatusServiceUnavailable && strings.Contains(body, "Flush failed with unexpected error")):
			return fmt.Errorf("%d %s", code, body)
		}
		t.Fatalf("doFlush on n2: %d %s %v", code, body, err)
		return nil
	})
	// Answered 200: every document is gone on every node already.
	for _, n := range nodes {
		for key := range keys {
			if code, body, err := readRetrying(t, n, key); err != nil || code != http.StatusNotFound {
				t.Fatalf("%s after the flush, on %s: %d %s %v", key, n.name, code, body, err)
			}
		}
		code, body, _, err := apiReq(n, http.MethodGet, "/pools/default/buckets/default", "")
		if err != nil || code != http.StatusOK || !strings.Contains(body, `"itemCount":0`) {
			t.Fatalf("%s after the flush: %d %s %v", n.name, code, body, err)
		}
	}
	writeAnywhere(t, nodes, http.MethodPut, "after", `{"v":3}`)
	for _, n := range nodes {
		eventuallyT(t, n.name+" reads the write made after the flush", func() error {
			if code, body, _, err := apiReq(n, http.MethodGet, "/default/docs/after", ""); err != nil || code != http.StatusOK {
				return fmt.Errorf("%d %s %v", code, body, err)
			}
			return nil
		})
	}
}
