package httpapi_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
)

// `_all_docs?keys=[...]` reads its own acknowledged deletes (a review found
// it did not). A DELETE is acknowledged from memory (durability none) before
// its group commit; until that commit, a keys row for the deleted document
// answered {"key":"x","error":"not_found"} instead of the deleted row
// {"id":"x","key":"x","value":{"rev":"2-…","deleted":true}} that CouchDB
// gives and that the same request gives a moment later (the README's
// _all_docs row; the engine promises a listing "reads its own acknowledged
// writes as Get does"). Collection.Tombstone read only the
// committed version, not the acknowledged one.
func TestAllDocsKeysSeesAcknowledgedDelete(t *testing.T) {
	f := newFixtureEngine(t, &engine.Options{FlushInterval: time.Hour}, nil, nil)
	// A couchbase bucket at Couchbase's default level, none.
	if st, _, body := f.do("POST", "/pools/default/buckets", formCT, "name=nd&bucketType=couchbase&ramQuota=100&durabilityMinLevel=none"); st != 202 {
		t.Fatalf("create: %d %s", st, body)
	}
	if st, _, body := f.do("PUT", "/nd/docs/x?durability=persistToMajority", "application/json", `{"v":1}`); st != 200 && st != 201 {
		t.Fatalf("put: %d %s", st, body)
	}
	if st, _, body := f.do("DELETE", "/nd/docs/x", "", ""); st != 200 {
		t.Fatalf("delete: %d %s", st, body)
	}
	if st, _, _ := f.do("GET", "/nd/docs/x", "", ""); st != 404 {
		t.Fatalf("GET after the delete: %d, want 404", st)
	}
	st, _, body := f.do("GET", `/nd/_all_docs?keys=["x"]`, "", "")
	if st != 200 || !strings.Contains(body, `"deleted":true`) || strings.Contains(body, `not_found`) {
		t.Errorf("_all_docs?keys=[\"x\"] right after DELETE x: %d %s\nwant the deleted row {\"id\":\"x\",\"key\":\"x\",\"value\":{\"rev\":\"2-…\",\"deleted\":true}}", st, body)
	}
}

// An expired document's `_all_docs?keys=[...]` row must not change when the
// expiry pager runs (a review found it did). The README promises {"key","error":"not_found"}
// "for a missing or expired one" (and that a purge changes nothing a reader
// sees: "the counts, reads, views and the change feed see the same thing as
// before"); before the pager ran the row was not_found, after it the purged
// document's tombstone answered {"value":{"rev":"2-…","deleted":true}}, so
// what a client saw of the same expired key depended on when the pager ran.
func TestAllDocsKeysExpiredRowSameAfterPager(t *testing.T) {
	f := newFixture(t)
	f.bulkLines(`{"op":"upsert","id":"e","doc":{"v":1},"expiry":5}` + "\n")
	f.clk.Advance(10)
	_, _, before := f.do("GET", `/default/_all_docs?keys=["e"]`, "", "")
	if !strings.Contains(before, `{"key":"e","error":"not_found"}`) {
		t.Fatalf("expired, not purged: %s", before)
	}
	if _, err := f.pager.RunNow(context.Background(), "default"); err != nil {
		t.Fatal(err)
	}
	// total_rows counts an expired document until it is purged (README),
	// so only the rows must stay the same.
	rows := func(body string) string { return body[strings.Index(body, `"rows"`):] }
	if _, _, body := f.do("GET", `/default/_all_docs?keys=["e"]`, "", ""); rows(body) != rows(before) {
		t.Errorf("the same expired key after the pager purged it:\n%s\nbefore the pager:\n%s", body, before)
	}
}

// POST /{bucket}/_all_docs takes every query parameter given in its JSON
// body, not keys alone (a review found it ignored the others). CouchDB's POST _all_docs takes the GET
// parameters as members of the body object (CouchDB 3 API reference,
// "POST /{db}/_all_docs": "supports identical parameters and behavior as
// specified in the GET /{db}/_all_docs API but allows for the query string
// parameters to be supplied as keys in a JSON object in the body"; the
// Cloudant SDKs' postAllDocs sends include_docs, limit, startkey there).
// Mayfly answered 200 as if they were not there: rows without "doc" for
// {"keys":[...],"include_docs":true}, and the whole collection for
// {"startkey":"b","limit":1}.
func TestAllDocsPostBodyParameters(t *testing.T) {
	f := newFixture(t)
	f.bulkLines(`{"op":"upsert","id":"a","doc":{"v":"a"}}
{"op":"upsert","id":"b","doc":{"v":"b"}}
{"op":"upsert","id":"c","doc":{"v":"c"}}
`)
	st, _, body := f.do("POST", "/default/_all_docs", "application/json", `{"keys":["a"],"include_docs":true}`)
	if st != 200 || !strings.Contains(body, `"doc":{"_id":"a"`) {
		t.Errorf(`POST {"keys":["a"],"include_docs":true}: %d %s, want the row with its doc`, st, body)
	}
	st, _, body = f.do("POST", "/default/_all_docs", "application/json", `{"startkey":"b","limit":1}`)
	if st != 200 || strings.Contains(body, `"id":"a"`) || strings.Contains(body, `"id":"c"`) || !strings.Contains(body, `"id":"b"`) {
		t.Errorf(`POST {"startkey":"b","limit":1}: %d %s, want the one row of b`, st, body)
	}
}
