package sdktest

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/couchbase/gocb/v2"
)

// viewRows runs a view query and returns its rows' keys and values.
func viewRows(t *testing.T, b *gocb.Bucket, opts *gocb.ViewOptions) (keys []any, values []float64) {
	t.Helper()
	res, err := b.ViewQuery("scores", "by_player", opts)
	if err != nil {
		t.Fatalf("view query %+v: %v", opts, err)
	}
	for res.Next() {
		r := res.Row()
		var k any
		var v float64
		if err := r.Key(&k); err != nil {
			t.Fatal(err)
		}
		if err := r.Value(&v); err != nil {
			t.Fatal(err)
		}
		keys, values = append(keys, k), append(values, v)
	}
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	return keys, values
}

// A design document saved through ViewIndexes, queried with ViewQuery:
// keys, ranges, reduce and group levels, request_plus; a document that
// expires keeps its rows until the expiry pager purges it, as in
// Couchbase.
func TestViewQuery(t *testing.T) {
	s := start(t)
	admin, _ := s.connect(t, adminUser, adminPassword)
	b := admin.Bucket(bucketName)
	coll := b.DefaultCollection()
	for i := range 6 {
		doc := map[string]any{"type": "score", "player": []any{"p" + strconv.Itoa(i%3), i % 2}, "score": i}
		var opts *gocb.UpsertOptions
		if i == 5 {
			opts = &gocb.UpsertOptions{Expiry: time.Minute}
		}
		if _, err := coll.Upsert("s"+strconv.Itoa(i), doc, opts); err != nil {
			t.Fatal(err)
		}
	}
	err := b.ViewIndexes().UpsertDesignDocument(gocb.DesignDocument{Name: "scores", Views: map[string]gocb.View{
		"by_player": {Map: "function (doc, meta) { if (doc.type == 'score') emit(doc.player, doc.score); }", Reduce: "_sum"},
	}}, gocb.DesignDocumentNamespaceProduction, nil)
	if err != nil {
		t.Fatalf("UpsertDesignDocument: %v", err)
	}
	plus := gocb.ViewScanConsistencyRequestPlus
	_, sums := viewRows(t, b, &gocb.ViewOptions{Reduce: true, ScanConsistency: plus})
	if len(sums) != 1 || sums[0] != 15 {
		t.Fatalf("reduce: %v, want [15]", sums)
	}
	keys, sums := viewRows(t, b, &gocb.ViewOptions{Reduce: true, GroupLevel: 1, ScanConsistency: plus})
	if len(keys) != 3 || sums[0] != 0+3 || sums[1] != 1+4 || sums[2] != 2+5 {
		t.Fatalf("group_level=1: %v %v", keys, sums)
	}
	_, vals := viewRows(t, b, &gocb.ViewOptions{Reduce: false, Keys: []any{[]any{"p1", 0}, []any{"p0", 1}}, ScanConsistency: plus})
	if len(vals) != 2 || vals[0] != 4 || vals[1] != 3 {
		t.Fatalf("keys: %v", vals)
	}
	_, vals = viewRows(t, b, &gocb.ViewOptions{Reduce: false, StartKey: []any{"p1"}, EndKey: []any{"p1", map[string]any{}}, ScanConsistency: plus})
	if len(vals) != 2 || vals[0] != 4 || vals[1] != 1 {
		t.Fatalf("range: %v", vals)
	}

	// s5 expires: its row stays in the reduce until the pager purges it.
	s.clock.Advance(61)
	if _, sums = viewRows(t, b, &gocb.ViewOptions{Reduce: true, ScanConsistency: plus}); len(sums) != 1 || sums[0] != 15 {
		t.Fatalf("reduce once s5 expired, before the pager: %v, want [15]", sums)
	}
	if _, err := s.pager.RunNow(context.Background(), bucketName); err != nil {
		t.Fatal(err)
	}
	_, sums = viewRows(t, b, &gocb.ViewOptions{Reduce: true, ScanConsistency: plus})
	if len(sums) != 1 || sums[0] != 10 {
		t.Fatalf("reduce after the pager: %v, want [10]", sums)
	}
}

// A user without the role an operation needs is refused, and nothing
// changes: data_reader cannot write, and cannot save design documents.
func TestMissingRole(t *testing.T) {
	s := start(t)
	if err := s.users.PutUser("reader", "", "reader-pass", mustRoles(t, "data_reader["+bucketName+"]")); err != nil {
		t.Fatal(err)
	}
	cl, coll := s.connect(t, "reader", "reader-pass")
	_, err := coll.Upsert("k", 1, nil)
	if err == nil {
		t.Fatal("a data_reader wrote a document")
	}
	t.Logf("upsert without data_writer: %v", err)
	if !errors.Is(err, gocb.ErrAuthenticationFailure) {
		t.Fatalf("upsert without data_writer: %v, want ErrAuthenticationFailure (EACCESS)", err)
	}
	if _, err := coll.Get("k", nil); !errors.Is(err, gocb.ErrDocumentNotFound) {
		t.Fatalf("get: %v, want ErrDocumentNotFound", err)
	}
	err = cl.Bucket(bucketName).ViewIndexes().UpsertDesignDocument(gocb.DesignDocument{Name: "d", Views: map[string]gocb.View{
		"v": {Map: "function (doc, meta) { emit(meta.id, null); }"}}}, gocb.DesignDocumentNamespaceProduction, nil)
	if err == nil {
		t.Fatal("a data_reader saved a design document")
	}
}

// A scope and a collection with a maximum expiry made through the SDK's
// collection manager; a document written there without an expiry gets
// the collection's.
func TestCollectionManager(t *testing.T) {
	s := start(t)
	admin, _ := s.connect(t, adminUser, adminPassword)
	b := admin.Bucket(bucketName)
	mgr := b.CollectionsV2()
	if err := mgr.CreateScope("inventory", nil); err != nil {
		t.Fatalf("CreateScope: %v", err)
	}
	if err := mgr.CreateCollection("inventory", "hotels", &gocb.CreateCollectionSettings{MaxExpiry: time.Hour}, nil); err != nil {
		t.Fatalf("CreateCollection: %v", err)
	}
	scopes, err := mgr.GetAllScopes(nil)
	if err != nil {
		t.Fatalf("GetAllScopes: %v", err)
	}
	found := false
	for _, sc := range scopes {
		for _, c := range sc.Collections {
			if sc.Name == "inventory" && c.Name == "hotels" && c.MaxExpiry == time.Hour {
				found = true
			}
		}
	}
	if !found {
		t.Fatalf("GetAllScopes: %+v, want inventory.hotels with a max expiry of 1h", scopes)
	}
	coll := b.Scope("inventory").Collection("hotels")
	if _, err := coll.Upsert("h1", map[string]string{"name": "Ritz"}, nil); err != nil {
		t.Fatalf("upsert in the new collection: %v", err)
	}
	got, err := coll.Get("h1", &gocb.GetOptions{WithExpiry: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Unix(s.clock.Now()+3600, 0); !got.ExpiryTime().Equal(want) {
		t.Fatalf("expiry %v, want the collection's maxTTL: %v", got.ExpiryTime(), want)
	}
	if _, err := b.DefaultCollection().Get("h1", nil); !errors.Is(err, gocb.ErrDocumentNotFound) {
		t.Fatalf("h1 in _default: %v", err)
	}
	if _, err := b.Scope("inventory").Collection("nope").Upsert("x", 1, &gocb.UpsertOptions{Timeout: 2 * time.Second}); err == nil {
		t.Fatal("upsert into a missing collection succeeded")
	}
}
