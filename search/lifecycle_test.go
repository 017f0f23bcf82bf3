package search_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/search"
)

const atPlus = `"ctl":{"consistency":{"level":"at_plus"}}`

// TestExpiryExact: a document leaves hits, total_hits and facets at the
// second it expires, purged or not; once purged, the index drops it.
func TestExpiryExact(t *testing.T) {
	for _, typ := range []engine.BucketType{engine.Couchbase, engine.Ephemeral} {
		t.Run(string(typ), func(t *testing.T) {
			e := loadHotels(t, typ)
			e.put("h1", hotels["h1"], t0+10) // Paris, expires at t0+10
			e.put("h7", `{"city":"Paris","desc":"river boat","price":90}`, 20)
			ctx := context.Background()
			req := `{"query":{"match":"paris","field":"city"},"sort":["_id"],"facets":{"cities":{"field":"city","size":5}},` + atPlus + `}`
			check := func(want []string) {
				t.Helper()
				a := e.query("hotels", req)
				if got := a.ids(); !slices.Equal(got, want) || a.TotalHits != uint64(len(want)) {
					t.Fatalf("at %d: hits %v (total %d), want %v", e.clk.Now()-t0, got, a.TotalHits, want)
				}
				if got, w := facetString(facet(t, a, "cities")), fmt.Sprintf("total=%d paris=%d", len(want), len(want)); got != w {
					t.Fatalf("at %d: facet %s, want %s", e.clk.Now()-t0, got, w)
				}
			}
			check([]string{"h1", "h4", "h7"})
			e.clk.Set(t0 + 9)
			check([]string{"h1", "h4", "h7"})
			e.clk.Set(t0 + 10)
			check([]string{"h4", "h7"})
			if n, _ := e.svc.Count(ctx, "default", "hotels"); n != 6 {
				t.Fatalf("count %d at t0+10, want 6", n)
			}
			e.clk.Set(t0 + 20)
			check([]string{"h4"})
			if n, _ := e.svc.Count(ctx, "default", "hotels"); n != 5 {
				t.Fatalf("count %d at t0+20, want 5", n)
			}
			// Until purged, they are in the index (and Check accepts it).
			if err := e.svc.Check(ctx); err != nil {
				t.Fatal(err)
			}
			b := e.bucket()
			if n, _, err := b.ExpireBatch(ctx, 100); err != nil || n != 2 {
				t.Fatalf("expired %d, %v", n, err)
			}
			if err := b.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			a := e.query("hotels", `{"query":{"ids":["h1","h7"]},"size":10,`+atPlus+`}`)
			if a.TotalHits != 0 {
				t.Fatalf("purged documents found: %v", a.ids())
			}
			st, err := e.svc.IndexStats(ctx, "default", "hotels")
			if err != nil {
				t.Fatal(err)
			}
			if st.DocsDeleted < 2 || st.DocCount != 5 || st.SeqsBehind != 0 {
				t.Fatalf("stats %+v", st)
			}
			// Going back in time does not bring them back.
			e.clk.Set(t0)
			check([]string{"h4"})
		})
	}
}

// TestDeletesAndReplaces: deleted, replaced-by-binary and
// replaced-by-non-object documents leave the index.
func TestDeletesAndReplaces(t *testing.T) {
	e := loadHotels(t, engine.Couchbase)
	e.del("h2")
	e.put("h3", `[1,2,3]`, 0)
	if _, err := e.bucket().DefaultCollection().Upsert(context.Background(), "h5", []byte("plain text"), nil); err != nil {
		t.Fatal(err)
	}
	a := e.query("hotels", `{"query":{"match_all":{}},"sort":["_id"],`+atPlus+`}`)
	if got := a.ids(); !slices.Equal(got, []string{"h1", "h4", "h6"}) {
		t.Fatalf("hits %v", got)
	}
}

// TestRestartResumes: an index reopened after a restart goes on from where
// it was, indexing only what changed.
func TestRestartResumes(t *testing.T) {
	e := newEnv(t, engine.Couchbase, search.Options{})
	e.createIndex("i", `{}`)
	for i := range 500 {
		e.put(fmt.Sprint("d", i), fmt.Sprintf(`{"n":%d,"text":"doc number %d"}`, i, i), 0)
	}
	if a := e.query("i", `{"query":{"match_all":{}},"size":0,`+atPlus+`}`); a.TotalHits != 500 {
		t.Fatalf("total %d", a.TotalHits)
	}
	e.close()
	e.open()
	ctx := context.Background()
	if a := e.query("i", `{"query":{"match_all":{}},"size":0}`); a.TotalHits != 500 {
		t.Fatalf("after restart: total %d", a.TotalHits)
	}
	e.put("d0", `{"n":0,"text":"changed"}`, 0)
	e.put("new", `{"text":"new"}`, 0)
	if a := e.query("i", `{"query":{"match":"changed","field":"text"},`+atPlus+`}`); a.TotalHits != 1 {
		t.Fatalf("after a write: %d", a.TotalHits)
	}
	st, err := e.svc.IndexStats(ctx, "default", "i")
	if err != nil {
		t.Fatal(err)
	}
	if st.DocsIndexed != 2 || st.DocCount != 501 || st.Rollbacks != 0 {
		t.Fatalf("stats after restart %+v, want 2 documents indexed", st)
	}
	if got := e.bucket().Consumers(); !slices.Equal(got, []string{"search:i"}) {
		t.Fatalf("consumers %v", got)
	}
}

// TestRollback: an index whose position is not in the bucket's history (the
// bucket was recreated) is rebuilt, never served.
func TestRollback(t *testing.T) {
	e := newEnv(t, engine.Couchbase, search.Options{})
	e.createIndex("i", `{}`)
	for i := range 100 {
		e.put(fmt.Sprint("old", i), `{"a":1}`, 0)
	}
	if a := e.query("i", `{"query":{"match_all":{}},"size":0,`+atPlus+`}`); a.TotalHits != 100 {
		t.Fatalf("total %d", a.TotalHits)
	}
	b := e.bucket()
	path := search.IndexPath(b, "i")
	def, _ := b.SystemDoc(search.DefPrefix + "i")
	e.close()
	saved := filepath.Join(t.TempDir(), "saved")
	if err := os.CopyFS(saved, os.DirFS(path)); err != nil {
		t.Fatal(err)
	}

	ctx := context.Background()
	eng, err := engine.Open(e.dir, &engine.Options{Clock: e.clk, NumPartitions: 16, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.DeleteBucket(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	if b, err = eng.CreateBucket(ctx, engine.DefaultBucketSettings("default")); err != nil {
		t.Fatal(err)
	}
	b.PutSystemDoc(ctx, search.DefPrefix+"i", def)
	for i := range 3 {
		b.DefaultCollection().Upsert(ctx, fmt.Sprint("new", i), []byte(`{"a":2}`), nil)
	}
	if err := os.CopyFS(path, os.DirFS(saved)); err != nil {
		t.Fatal(err)
	}
	eng.Close()

	e.opts.NoAutoUpdate = true // what a query sees is the index as opened
	e.open()
	if a := e.query("i", `{"query":{"match_all":{}},"size":0}`); a.TotalHits != 0 {
		t.Fatalf("documents of the old history served: %d", a.TotalHits)
	}
	if a := e.query("i", `{"query":{"match_all":{}},"size":0,`+atPlus+`}`); a.TotalHits != 3 {
		t.Fatalf("after the rebuild: %d", a.TotalHits)
	}
	st, _ := e.svc.IndexStats(ctx, "default", "i")
	if st.Rollbacks != 1 || e.svc.Rollbacks() != 1 {
		t.Fatalf("rollbacks %d/%d, want 1", st.Rollbacks, e.svc.Rollbacks())
	}
}

// TestDeleteIndex: deleting an index removes its definition, its files and
// its change-feed registration.
func TestDeleteIndex(t *testing.T) {
	e := loadHotels(t, engine.Couchbase)
	ctx := context.Background()
	b := e.bucket()
	path := search.IndexPath(b, "hotels")
	if strings.Contains(path, "hotels") || !strings.HasPrefix(path, b.Dir()) {
		t.Fatalf("index path %s", path)
	}
	e.query("hotels", `{"query":{"match_all":{}},`+atPlus+`}`)
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.DeleteIndex(ctx, "default", "hotels"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("index files left: %v", err)
	}
	if got := b.Consumers(); len(got) != 0 {
		t.Fatalf("consumers %v", got)
	}
	if _, err := e.svc.GetIndex(ctx, "default", "hotels"); !errors.Is(err, search.ErrNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
	if err := e.svc.DeleteIndex(ctx, "default", "hotels"); !errors.Is(err, search.ErrNotFound) {
		t.Fatalf("delete twice: %v", err)
	}
	if _, err := e.svc.Query(ctx, "default", "hotels", []byte(`{"query":{"match_all":{}}}`)); !errors.Is(err, search.ErrNotFound) {
		t.Fatalf("query after delete: %v", err)
	}
	// Deleting the bucket removes every index's files.
	e.createIndex("again", `{}`)
	e.query("again", `{"query":{"match_all":{}},`+atPlus+`}`)
	dir := filepath.Join(b.Dir(), "search")
	if err := e.eng.DeleteBucket(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("index files left after the bucket's deletion: %v", err)
	}
}

// TestAtPlus: a query with at_plus consistency sees a write made just
// before it, even when the index does not follow the feed on its own.
func TestAtPlus(t *testing.T) {
	e := newEnv(t, engine.Couchbase, search.Options{NoAutoUpdate: true})
	e.createIndex("i", `{}`)
	for i := range 50 {
		e.put(fmt.Sprint("k", i), fmt.Sprintf(`{"word":"w%d"}`, i), 0)
		if i%10 == 0 {
			if a := e.query("i", `{"query":{"term":"w`+fmt.Sprint(i)+`","field":"word"},`+atPlus+`}`); a.TotalHits != 1 {
				t.Fatalf("write %d not seen", i)
			}
		}
	}
	if a := e.query("i", `{"query":{"term":"w49","field":"word"}}`); a.TotalHits != 0 {
		t.Fatalf("not_bounded caught up on its own: %d", a.TotalHits)
	}
	if a := e.query("i", `{"query":{"term":"w49","field":"word"},`+atPlus+`}`); a.TotalHits != 1 {
		t.Fatalf("at_plus: %d", a.TotalHits)
	}
}

// TestDefinitions: definitions are validated, stored, listed and replaced;
// only the source collection is indexed.
func TestDefinitions(t *testing.T) {
	e := newEnv(t, engine.Couchbase, search.Options{})
	ctx := context.Background()
	for _, def := range []string{
		`nope`,
		`{"type":"fulltext-alias"}`,
		`{"name":"other"}`,
		`{"sourceName":"elsewhere"}`,
		`{"sourceType":"files"}`,
		`{"params":{"mapping":{"default_analyzer":"no-such-analyzer"}}}`,
		`{"params":{"mapping":{"types":7}}}`,
		`{"sourceCollection":"nodot"}`,
		`{"sourceCollection":"s.missing"}`,
	} {
		_, err := e.svc.PutIndex(ctx, "default", "ix", []byte(def))
		var de *search.DefError
		if !errors.As(err, &de) {
			t.Errorf("%s: %v, want a DefError", def, err)
		}
	}
	for _, name := range []string{"", "1abc", "a b", "a/b", "a.b"} {
		var de *search.DefError
		if _, err := e.svc.PutIndex(ctx, "default", name, []byte(`{}`)); !errors.As(err, &de) {
			t.Errorf("name %q: %v", name, err)
		}
	}
	b := e.bucket()
	if err := b.CreateScope(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	c, err := b.CreateCollection(ctx, "s", "c", 0)
	if err != nil {
		t.Fatal(err)
	}
	coll, _ := b.Collection("s", c.Name)
	e.createIndex("dflt", `{"params":{"mapping":{"default_mapping":{"dynamic":false,"properties":{"title":{"fields":[{"name":"title","type":"text","index":true}]}}}}}}`)
	e.createIndex("coll", `{"sourceCollection":"s.c"}`)
	e.put("a", `{"title":"apple pie","body":"sweet"}`, 0)
	coll.Upsert(ctx, "b", []byte(`{"title":"banana bread","body":"sweet"}`), nil)
	if a := e.query("dflt", `{"query":{"match":"apple","field":"title"},`+atPlus+`}`); !slices.Equal(a.ids(), []string{"a"}) {
		t.Fatalf("dflt: %v", a.ids())
	}
	if a := e.query("dflt", `{"query":{"match":"sweet","field":"body"},`+atPlus+`}`); a.TotalHits != 0 {
		t.Fatalf("unmapped field indexed: %v", a.ids())
	}
	if a := e.query("coll", `{"query":{"match":"sweet","field":"body"},`+atPlus+`}`); !slices.Equal(a.ids(), []string{"b"}) {
		t.Fatalf("coll: %v", a.ids())
	}
	defs, err := e.svc.ListIndexes(ctx, "default")
	if err != nil || len(defs) != 2 || defs[0].Name != "coll" || defs[1].Name != "dflt" {
		t.Fatalf("list: %v %v", defs, err)
	}
	d, err := e.svc.GetIndex(ctx, "default", "coll")
	if err != nil || d.Type != search.IndexType || d.SourceName != "default" || d.SourceType != "couchbase" || d.UUID == "" {
		t.Fatalf("get: %+v %v", d, err)
	}
	// Replaced with a new mapping, the index is rebuilt.
	e.createIndex("dflt", `{}`)
	if a := e.query("dflt", `{"query":{"match":"sweet","field":"body"},`+atPlus+`}`); !slices.Equal(a.ids(), []string{"a"}) {
		t.Fatalf("dflt replaced: %v", a.ids())
	}
	// Names are unique across buckets.
	if _, err := e.eng.CreateBucket(ctx, engine.DefaultBucketSettings("other")); err != nil {
		t.Fatal(err)
	}
	var de *search.DefError
	if _, err := e.svc.PutIndex(ctx, "other", "dflt", []byte(`{}`)); !errors.As(err, &de) {
		t.Fatalf("a name used in another bucket: %v", err)
	}
	if got, _ := e.svc.FindIndex("coll"); got != "default" {
		t.Fatalf("FindIndex: %q", got)
	}
}

// TestReplaceStaged: a definition whose mapping changed is built as a new
// index beside the old one (which answers until the new one takes over),
// then moved into the old one's place: after the replacement the new index
// answers, its files are at the index's path with no staging copy left, and
// after a restart it opens from there as it is, without a rebuild.
func TestReplaceStaged(t *testing.T) {
	e := newEnv(t, engine.Couchbase, search.Options{})
	for i := range 50 {
		e.put(fmt.Sprint("d", i), fmt.Sprintf(`{"title":"doc %d","body":"word%d"}`, i, i), 0)
	}
	e.createIndex("i", `{}`)
	if a := e.query("i", `{"query":{"match":"word7","field":"body"},`+atPlus+`}`); a.TotalHits != 1 {
		t.Fatalf("before: %d hits", a.TotalHits)
	}
	titleOnly := `{"params":{"mapping":{"default_mapping":{"dynamic":false,"properties":{"title":{"fields":[{"name":"title","type":"text","index":true}]}}}}}}`
	e.createIndex("i", titleOnly)
	if a := e.query("i", `{"query":{"match":"word7","field":"body"},`+atPlus+`}`); a.TotalHits != 0 {
		t.Fatalf("the replaced mapping still answers: %d hits", a.TotalHits)
	}
	if a := e.query("i", `{"query":{"match":"doc","field":"title"},"size":0,`+atPlus+`}`); a.TotalHits != 50 {
		t.Fatalf("after the replacement: %d hits", a.TotalHits)
	}
	// The move into place follows the build, in the background.
	if err := search.WaitMoved(e.svc, "default", "i"); err != nil {
		t.Fatal(err)
	}
	path := search.IndexPath(e.bucket(), "i")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the new index is not at the index's path: %v", err)
	}
	if _, err := os.Stat(path + ".next"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a staging copy is left: %v", err)
	}
	// Written after the move: the moved index keeps indexing.
	e.put("late", `{"title":"late doc"}`, 0)
	if a := e.query("i", `{"query":{"match":"late","field":"title"},`+atPlus+`}`); a.TotalHits != 1 {
		t.Fatalf("a write after the move: %d hits", a.TotalHits)
	}
	e.close()
	e.open()
	st, err := e.svc.IndexStats(context.Background(), "default", "i")
	if err != nil {
		t.Fatal(err)
	}
	if st.DocCount != 51 || st.DocsIndexed != 0 || st.Rollbacks != 0 {
		t.Fatalf("after a restart %+v, want the moved index as it was (51 documents, none reindexed)", st)
	}
	if got := e.bucket().Consumers(); !slices.Equal(got, []string{"search:i"}) {
		t.Fatalf("consumers %v", got)
	}
}

// TestReplaceKeepsAnswering: while a definition is replaced, the index never
// goes missing and no query fails: a query finds the old index or the new
// one, never "not found" (the old index answers until the new one takes
// over), and one that loses the old index runs again on the new one.
func TestReplaceKeepsAnswering(t *testing.T) {
	e := newEnv(t, engine.Couchbase, search.Options{})
	for i := range 20 {
		e.put(fmt.Sprint("d", i), fmt.Sprintf(`{"title":"doc %d"}`, i), 0)
	}
	e.createIndex("i", `{}`)
	ctx := context.Background()
	stop := make(chan struct{})
	missing := make(chan error, 1)
	queried := make(chan int, 1)
	first := make(chan struct{}) // closed once a query has answered
	// The querier stops before the environment closes (cleanups run last
	// registered first), also when a replacement fails the test: it would
	// otherwise query a closed, cleared environment.
	n := -1
	halt := sync.OnceFunc(func() { close(stop); n = <-queried })
	t.Cleanup(halt)
	go func() {
		n := 0
		defer func() { queried <- n }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			_, err := e.svc.Search(ctx, "default", "i", []byte(`{"query":{"match_all":{}},"size":0}`))
			if n++; n == 1 {
				close(first)
			}
			if err != nil {
				missing <- err
				return
			}
		}
	}()
	// The replacements start once the querier runs (a busy machine could
	// otherwise schedule it only after the last).
	select {
	case <-first:
	case <-time.After(2 * time.Minute): // a hang guard
		t.Fatal("no query answered in two minutes")
	}
	for r := range 10 {
		e.createIndex("i", fmt.Sprintf(`{"params":{"mapping":{"default_analyzer":"standard","default_mapping":{"dynamic":true,"properties":{"f%d":{"fields":[{"name":"f%d","type":"text","index":true}]}}}}}}`, r, r))
		select {
		case err := <-missing:
			t.Fatalf("replacement %d: a query failed: %v", r, err)
		default:
		}
	}
	halt()
	t.Logf("%d queries during 10 replacements", n)
	select {
	case err := <-missing:
		t.Fatalf("a query failed: %v", err)
	default:
	}
}

// TestReplaceEmptyThenWrite, as the README does it: an index defined on an
// empty bucket and replaced at once (nothing to build, so the new index is
// moved into place straight away), then a document written and searched
// for: the moved index finds it, and opens after a restart.
func TestReplaceEmptyThenWrite(t *testing.T) {
	e := newEnv(t, engine.Couchbase, search.Options{})
	titleOnly := `{"params":{"mapping":{"default_mapping":{"dynamic":false,"properties":{"title":{"fields":[{"name":"title","type":"text","index":true}]}}}}}}`
	for range 5 {
		e.createIndex("i", `{}`)
		e.createIndex("i", titleOnly)
		if err := search.WaitMoved(e.svc, "default", "i"); err != nil {
			t.Fatal(err)
		}
	}
	e.put("h1", `{"title":"harbour view"}`, 0)
	if a := e.query("i", `{"query":{"match":"harbour","field":"title"},`+atPlus+`}`); a.TotalHits != 1 {
		t.Fatalf("after the replacements: %d hits", a.TotalHits)
	}
	e.close()
	e.open()
	if a := e.query("i", `{"query":{"match":"harbour","field":"title"},`+atPlus+`}`); a.TotalHits != 1 {
		t.Fatalf("after a restart: %d hits", a.TotalHits)
	}
}
