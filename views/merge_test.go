package views_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/index"
	"github.com/mayflydb/mayfly/internal/racebuild"
	"github.com/mayflydb/mayfly/views"
)

// mergeDDoc has a map-only view and one view per reducer over the same map:
// array keys for group_level, scalar keys mixed in, documents emitting
// twice, some the same key twice (emit order matters).
const mergeMap = `function (doc, meta) {
	emit([doc.a, doc.b], doc.v);
	if (doc.v % 7 == 0) emit(doc.a, doc.v % 3);
	if (doc.v % 11 == 0) emit([doc.a, doc.b], -doc.v);
}`

func mergeDDoc() []byte {
	m, _ := json.Marshal(mergeMap)
	red := map[string]string{
		"c": `"_count"`, "s": `"_sum"`, "st": `"_stats"`,
		"js": `"function (keys, values, rereduce) { var o = {n: 0, s: 0}; for (var i = 0; i < values.length; i++) { if (rereduce) { o.n += values[i].n; o.s += values[i].s; } else { o.n++; o.s += values[i] || 0; } } return o; }"`,
	}
	var b strings.Builder
	fmt.Fprintf(&b, `{"views":{"m":{"map":%s}`, m)
	for v, r := range red {
		fmt.Fprintf(&b, `,%q:{"map":%s,"reduce":%s}`, v, m, r)
	}
	b.WriteString("}}")
	return []byte(b.String())
}

// oracleQuery runs params on the whole index (Run) and returns the answer, or
// "" when the parameters are refused.
func oracleQuery(t *testing.T, svc *views.Service, view string, params url.Values) string {
	t.Helper()
	p, err := views.ParseParams(params, nil)
	if err != nil {
		return ""
	}
	q, err := svc.Prepare(context.Background(), "default", "d", view, p)
	if err != nil {
		return ""
	}
	var buf bytes.Buffer
	if err := q.Run(context.Background(), &buf); err != nil {
		t.Fatalf("%s?%s: %v", view, params.Encode(), err)
	}
	return buf.String()
}

// scatter answers params as n nodes would, each covering the partitions
// owner assigns it: every node's rows, merged.
func scatter(t *testing.T, svc *views.Service, b *engine.Bucket, view string, params url.Values, owner []int, n int, now int64) string {
	t.Helper()
	p, err := views.ParseParams(params, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Every other node's share is read as it is walked (Stream), the
	// others' held whole (Partial): the merge reads both a row at a time.
	var srcs []views.Source
	for node := range n {
		q, err := svc.Prepare(ctx, "default", "d", view, p)
		if err != nil {
			t.Fatal(err)
		}
		covered := make([]bool, len(owner))
		for p, o := range owner {
			covered[p] = o == node
		}
		share := views.Share{Now: now, Partitions: covered}
		if node%2 == 1 {
			st, err := q.Stream(ctx, share)
			if err != nil {
				t.Fatalf("%s?%s: node %d: %v", view, params.Encode(), node, err)
			}
			defer st.Close()
			srcs = append(srcs, st.Source(fmt.Sprint("node", node)))
			continue
		}
		part, err := q.Partial(ctx, share)
		if err != nil {
			t.Fatalf("%s?%s: node %d: %v", view, params.Encode(), node, err)
		}
		srcs = append(srcs, part.Source(fmt.Sprint("node", node)))
	}
	q, err := svc.Prepare(ctx, "default", "d", view, p)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := q.MergeSources(ctx, srcs, nil, &buf); err != nil {
		t.Fatalf("%s?%s: merge: %v", view, params.Encode(), err)
	}
	return buf.String()
}

// TestMergeModel: a view's documents split by partition across 1 to 4
// nodes, each answering for its share, merge into exactly the answer of one
// node holding them all, for many random queries: ranges, document-id
// bounds, keys with duplicates, descending, skip and limit, include_docs,
// expired=exclude, and _count, _sum, _stats and a JavaScript reduce with
// group and group_level.
func TestMergeModel(t *testing.T) {
	t.Run("in memory", func(t *testing.T) { testMergeModel(t, views.Options{}) })
	// A paged index under a cache of one page: every read goes to its file.
	t.Run("paged", func(t *testing.T) { testMergeModel(t, views.Options{IndexCache: index.NewPageCache(1)}) })
}

func testMergeModel(t *testing.T, opts views.Options) {
	e := newEnv(t, opts)
	rng := rand.New(rand.NewPCG(22, 4))
	loadMergeDocs(t, rng, []*env{e}, func(string) int { return 0 })
	b, err := e.eng.Bucket("default")
	if err != nil {
		t.Fatal(err)
	}
	gen := randomQueries(rng, mergeAs)
	answered := 0
	var n int
	var owner []int
	for i := range racebuild.Scale(1500) { // the views service's goroutines: a quarter under -race
		if i%30 == 0 {
			// A new coverage, kept for 30 queries: the index answers the
			// same shares again from the reductions it cached for them.
			n = 1 + rng.IntN(4)
			owner = make([]int, b.NumPartitions())
			for i := range owner {
				owner[i] = rng.IntN(n)
			}
		}
		if i%100 == 50 {
			// Some documents change: the shares' cached reductions of
			// the changed subtrees must not answer any more.
			for range 10 {
				doc := fmt.Sprintf(`{"a":%s,"b":%d,"v":%d}`, mergeAs[rng.IntN(len(mergeAs))], rng.IntN(4), 1+rng.IntN(50))
				key := fmt.Sprintf("doc%03d", rng.IntN(1000))
				if _, err := e.coll().Upsert(context.Background(), key, []byte(doc), nil); err != nil {
					t.Fatal(err)
				}
			}
			for _, v := range []string{"m", "c", "s", "st", "js"} {
				oracleQuery(t, e.svc, v, url.Values{"stale": {"false"}, "reduce": {"false"}, "limit": {"0"}})
			}
		}
		view, p := gen()
		want := oracleQuery(t, e.svc, view, p)
		if want == "" {
			continue // refused (a reversed range): nothing to merge
		}
		answered++
		if got := scatter(t, e.svc, b, view, p, owner, n, e.clk.Now()); got != want {
			t.Fatalf("%s?%s across %d nodes (owners %v):\n got %s\nwant %s", view, p.Encode(), n, owner, got, want)
		}
	}
	if answered < 300 {
		t.Fatalf("only %d of the random queries were answerable", answered)
	}
}

// randomQueries returns a generator of random view queries of mergeDDoc's
// views (some of which the service refuses: reversed ranges).
func randomQueries(rng *rand.Rand, as []string) func() (view string, p url.Values) {
	var keyPool []string
	for _, a := range as {
		keyPool = append(keyPool, a)
		for bb := range 5 {
			keyPool = append(keyPool, fmt.Sprintf("[%s,%d]", a, bb))
		}
		keyPool = append(keyPool, fmt.Sprintf("[%s]", a), fmt.Sprintf("[%s,{}]", a))
	}
	keyPool = append(keyPool, `99`, `"zzz"`, `{}`, `[]`)
	docIDs := []string{"", "doc100", "doc500", "doc999", "doc0"}
	views_ := []string{"m", "c", "s", "st", "js"}
	return func() (string, url.Values) {
		view := views_[rng.IntN(len(views_))]
		p := url.Values{"stale": {"ok"}}
		reduce := view != "m"
		if reduce && rng.IntN(3) == 0 {
			p.Set("reduce", "false")
			reduce = false
		}
		desc := rng.IntN(2) == 0
		if desc {
			p.Set("descending", "true")
		}
		if rng.IntN(3) == 0 {
			var ks []string
			for range 1 + rng.IntN(5) {
				ks = append(ks, keyPool[rng.IntN(len(keyPool))])
			}
			if rng.IntN(4) == 0 {
				ks = append(ks, ks[0]) // a duplicate, maybe not adjacent
			}
			if rng.IntN(4) == 0 {
				ks = append(ks, ks[len(ks)-1]) // an adjacent one
			}
			p.Set("keys", "["+strings.Join(ks, ",")+"]")
			if reduce {
				p.Set("group", "true")
			}
		} else {
			if rng.IntN(2) == 0 {
				p.Set("startkey", keyPool[rng.IntN(len(keyPool))])
				if rng.IntN(3) == 0 {
					p.Set("startkey_docid", docIDs[rng.IntN(len(docIDs))])
				}
			}
			if rng.IntN(2) == 0 {
				p.Set("endkey", keyPool[rng.IntN(len(keyPool))])
				if rng.IntN(3) == 0 {
					p.Set("endkey_docid", docIDs[rng.IntN(len(docIDs))])
				}
			}
			if rng.IntN(4) == 0 {
				p.Set("inclusive_end", "false")
			}
			if reduce {
				switch rng.IntN(3) {
				case 0:
					p.Set("group", "true")
				case 1:
					p.Set("group_level", fmt.Sprint(rng.IntN(4)))
				}
			}
		}
		if rng.IntN(3) == 0 {
			p.Set("skip", fmt.Sprint(rng.IntN(12)))
		}
		if rng.IntN(2) == 0 {
			p.Set("limit", fmt.Sprint(rng.IntN(30)))
		}
		if !reduce && rng.IntN(5) == 0 {
			p.Set("include_docs", "true")
		}
		if rng.IntN(3) == 0 {
			p.Set("expired", "exclude")
		}
		return view, p
	}
}

// mergeAs are the values of the documents' field a: numbers, strings that
// collate case-insensitively first, null and an array.
var mergeAs = []string{`0`, `1`, `2`, `3`, `"a"`, `"B"`, `"b"`, `null`, `[1]`}

// loadMergeDocs defines mergeDDoc in each of envs and writes 400 random
// documents, each to envs[to(key)], a fifth of them expiring after 100
// seconds; then it moves every clock 200 seconds on (the expired documents
// are not purged) and brings the indexes up to date.
func loadMergeDocs(t *testing.T, rng *rand.Rand, envs []*env, to func(key string) int) {
	t.Helper()
	ctx := context.Background()
	for _, e := range envs {
		if _, err := e.svc.PutDesignDoc(ctx, "default", "d", mergeDDoc()); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 400 {
		opts := &engine.WriteOptions{}
		if i%5 == 0 {
			opts.Expiry = 100 // relative seconds: expired below, not purged
		}
		doc := fmt.Sprintf(`{"a":%s,"b":%d,"v":%d}`, mergeAs[rng.IntN(len(mergeAs))], rng.IntN(4), 1+rng.IntN(50))
		key := fmt.Sprintf("doc%03d", rng.IntN(1000))
		if _, err := envs[to(key)].coll().Upsert(ctx, key, []byte(doc), opts); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range envs {
		e.clk.Advance(200)
		for _, v := range []string{"m", "c", "s", "st", "js"} {
			oracleQuery(t, e.svc, v, url.Values{"stale": {"false"}, "reduce": {"false"}})
		}
	}
}

// revs matches the revs of documents in answers with include_docs.
var revs = regexp.MustCompile(`"rev":"[^"]*"`)

// TestMergeSeparateNodes: documents written to three separate services by
// their partitions (each whole index its node's share, with its cached
// reductions, total_rows and live counts as one node keeps them) merge
// into the answer of one service holding them all. Every document is
// written to the same partition's node in both layouts.
func TestMergeSeparateNodes(t *testing.T) {
	const nodes = 3
	oracle := newEnv(t, views.Options{})
	envs := make([]*env, nodes)
	for i := range envs {
		envs[i] = newEnv(t, views.Options{})
	}
	b, err := oracle.eng.Bucket("default")
	if err != nil {
		t.Fatal(err)
	}
	owner := func(key string) int { return b.PartitionOf(key) % nodes }
	loadMergeDocs(t, rand.New(rand.NewPCG(22, 5)), []*env{oracle}, func(string) int { return 0 })
	loadMergeDocs(t, rand.New(rand.NewPCG(22, 5)), envs, owner)
	rng := rand.New(rand.NewPCG(22, 6))
	gen := randomQueries(rng, mergeAs)
	ctx := context.Background()
	answered := 0
	for range 800 {
		view, params := gen()
		want := oracleQuery(t, oracle.svc, view, params)
		if want == "" {
			continue
		}
		answered++
		p, err := views.ParseParams(params, nil)
		if err != nil {
			t.Fatal(err)
		}
		var parts []*views.Partial
		var q *views.Query
		for _, e := range envs {
			if q, err = e.svc.Prepare(ctx, "default", "d", view, p); err != nil {
				t.Fatal(err)
			}
			part, err := q.Partial(ctx, views.Share{Now: oracle.clk.Now()})
			if err != nil {
				t.Fatal(err)
			}
			parts = append(parts, part)
		}
		var buf bytes.Buffer
		if err := q.Merge(ctx, parts, nil, &buf); err != nil {
			t.Fatal(err)
		}
		// Separate engines give a document another CAS, so another rev.
		if got := revs.ReplaceAllString(buf.String(), ""); got != revs.ReplaceAllString(want, "") {
			t.Fatalf("%s?%s:\n got %s\nwant %s", view, params.Encode(), got, want)
		}
	}
	if answered < 150 {
		t.Fatalf("only %d of the random queries were answerable", answered)
	}
}
