package views_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/views"
)

// TestExpiredExclude_RestartAndTouch: exact answers are the same after a
// restart (expirations persist with the index), and a touch that extends a
// document's expiration brings its rows back into exact answers once the
// index has seen it.
func TestExpiredExclude_RestartAndTouch(t *testing.T) {
	e := newEnvSync(t, views.Options{}, true)
	ctx := context.Background()
	if _, err := e.svc.PutDesignDoc(ctx, "default", "d", []byte(`{"views":{"n":{"map":"function (doc, meta) { emit(doc.g, doc.n); }","reduce":"_sum"}}}`)); err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		opts := &engine.WriteOptions{}
		if i%4 != 0 {
			opts.Expiry = int64(10 + i) // relative seconds
		}
		if _, err := e.coll().Upsert(ctx, fmt.Sprint("k", i), []byte(fmt.Sprintf(`{"g":%d,"n":%d}`, i%3, i)), opts); err != nil {
			t.Fatal(err)
		}
	}
	e.clk.Advance(110) // k1…k99 with i%4 != 0 have expired (expiry 10+i <= 110)
	// Live: every i%4 == 0, and i >= 101 (10+i > 110).
	wantSum, wantRows := 0, 0
	for i := range 200 {
		if i%4 == 0 || 10+i > 110 {
			wantSum += i
			wantRows++
		}
	}
	sum := e.query("d", "n", "expired=exclude&stale=false")
	if want := fmt.Sprintf(`{"rows":[{"key":null,"value":%d}]}`, wantSum); sum != want {
		t.Fatalf("exact sum: %s, want %s", sum, want)
	}
	groups := e.query("d", "n", "expired=exclude&group=true&stale=ok")
	rows := e.query("d", "n", "expired=exclude&reduce=false&stale=ok&limit=0")
	if want := fmt.Sprintf(`{"total_rows":%d,"rows":[]}`, wantRows); rows != want {
		t.Fatalf("exact total_rows: %s, want %s", rows, want)
	}
	e.close()
	e.open()
	for q, want := range map[string]string{"expired=exclude&stale=ok": sum, "expired=exclude&group=true&stale=ok": groups,
		"expired=exclude&reduce=false&stale=ok&limit=0": rows} {
		if got := e.query("d", "n", q); got != want {
			t.Errorf("after a restart, %s: %s, want %s", q, got, want)
		}
	}
	// k101 expires at 111 seconds: touching it gives it an hour more, and
	// five seconds later it is still in exact answers, unlike k102.
	if _, err := e.coll().Touch(ctx, "k101", 3600); err != nil {
		t.Fatalf("touch: %v", err)
	}
	e.clk.Advance(5)
	want := 0
	for i := range 200 {
		if i%4 == 0 || 10+i > 115 || i == 101 {
			want += i
		}
	}
	if got, want := e.query("d", "n", "expired=exclude&stale=false"), fmt.Sprintf(`{"rows":[{"key":null,"value":%d}]}`, want); got != want {
		t.Errorf("after touching a document: %s, want %s", got, want)
	}
}
