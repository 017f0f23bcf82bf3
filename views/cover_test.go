package views_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/index"
	"github.com/mayflydb/mayfly/views"
)

// A cluster node's indexes hold only the partitions it covers
// (Service.Cover, issue 22): the rows of the others leave at once and
// their new documents are not indexed; a partition gained is read again
// from its start and its rows come back exactly (views.Check, which
// compares with the partitions held); the set survives a restart (the
// indexes keep it until Cover is called again, without reindexing); and
// Cover(nil) holds every partition again.
func TestCoverIndexesOnlyThePartitionsHeld(t *testing.T) {
	t.Run("in memory", func(t *testing.T) { testCover(t, views.Options{}) })
	t.Run("paged", func(t *testing.T) { testCover(t, views.Options{IndexCache: index.NewPageCache(1)}) })
}

func testCover(t *testing.T, opts views.Options) {
	ctx := context.Background()
	e := newEnvSync(t, opts, true)
	if _, err := e.svc.PutDesignDoc(ctx, "default", "d", []byte(`{"views":{"n":{"map":"function (doc, meta) { emit(meta.id, doc.n); }","reduce":"_count"}}}`)); err != nil {
		t.Fatal(err)
	}
	b, err := e.eng.Bucket("default")
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	even, odd := 0, 0
	key := func(i int) string { return fmt.Sprintf("k%03d", i) }
	for i := range n {
		e.put(key(i), fmt.Sprintf(`{"n":%d}`, i))
		if b.PartitionOf(key(i))%2 == 0 {
			even++
		} else {
			odd++
		}
	}
	if even == 0 || odd == 0 {
		t.Fatalf("%d keys in even partitions, %d in odd ones: the test needs both", even, odd)
	}
	rows := func(stale string) string {
		t.Helper()
		return e.query("d", "n", "reduce=false&limit=0&stale="+stale)
	}
	want := func(k int) string { return fmt.Sprintf(`{"total_rows":%d,"rows":[]}`, k) }
	if got := rows("false"); got != want(n) {
		t.Fatalf("before Cover: %s, want %s", got, want(n))
	}
	parity := func(r int) []bool {
		parts := make([]bool, b.NumPartitions())
		for p := range parts {
			parts[p] = p%2 == r
		}
		return parts
	}

	// Even partitions only: the odd ones' rows leave, nothing is mapped
	// again.
	mapped := e.mapped("d")
	if err := e.svc.Cover(ctx, "default", parity(0)); err != nil {
		t.Fatal(err)
	}
	if got := rows("ok"); got != want(even) {
		t.Fatalf("holding the even partitions: %s, want %s", got, want(even))
	}
	if m := e.mapped("d"); m != mapped {
		t.Fatalf("holding fewer partitions mapped %d documents again", m-mapped)
	}
	if err := e.svc.Check(ctx); err != nil {
		t.Fatal(err)
	}
	// New documents of both kinds: only the even ones are indexed.
	addEven, addOdd := 0, 0
	for i := n; i < n+40; i++ {
		e.put(key(i), `{"n":1}`)
		if b.PartitionOf(key(i))%2 == 0 {
			addEven++
		} else {
			addOdd++
		}
	}
	if got := rows("false"); got != want(even+addEven) {
		t.Fatalf("after writes to every partition: %s, want %s", got, want(even+addEven))
	}

	// The odd partitions instead: read again from their start.
	if err := e.svc.Cover(ctx, "default", parity(1)); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.CatchUpPartitions(ctx, "default", []int{1, 3}); err != nil {
		t.Fatal(err)
	}
	if got := rows("ok"); got != want(odd+addOdd) {
		t.Fatalf("holding the odd partitions: %s, want %s", got, want(odd+addOdd))
	}
	if err := e.svc.Check(ctx); err != nil {
		t.Fatal(err)
	}

	// A restart keeps the set until Cover is called again.
	e.close()
	e.open()
	if got := rows("ok"); got != want(odd+addOdd) {
		t.Fatalf("after a restart: %s, want %s", got, want(odd+addOdd))
	}
	if m := e.mapped("d"); m != 0 {
		t.Fatalf("after a restart %d documents were mapped again", m)
	}
	e.put(key(0), `{"n":2}`) // an even partition's document changes
	if got := rows("false"); got != want(odd+addOdd) {
		t.Fatalf("after a restart and a write to a partition not held: %s, want %s", got, want(odd+addOdd))
	}

	// Every partition again.
	if err := e.svc.Cover(ctx, "default", nil); err != nil {
		t.Fatal(err)
	}
	if got := rows("false"); got != want(n+40) {
		t.Fatalf("holding every partition again: %s, want %s", got, want(n+40))
	}
	if err := e.svc.Check(ctx); err != nil {
		t.Fatal(err)
	}
}

// The partitions Cover set for a bucket belong to that bucket, not to its
// name: a bucket deleted and created again (a new incarnation, another
// UUID, whose coverage the cluster has not given this node yet) indexes
// every partition, as a bucket Cover was never called for does, and does
// not take the set of the bucket it replaced: its view would otherwise
// answer without the rows of the partitions left out, silently.
func TestCoverDoesNotOutliveItsBucket(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, views.Options{})
	b, err := e.eng.CreateBucket(ctx, engine.DefaultBucketSettings("b2"))
	if err != nil {
		t.Fatal(err)
	}
	none := make([]bool, b.NumPartitions()) // hold no partition at all
	if err := e.svc.Cover(ctx, "b2", none); err != nil && !errors.Is(err, views.ErrNoViews) {
		t.Fatal(err)
	}
	if err := e.eng.DeleteBucket(ctx, "b2"); err != nil {
		t.Fatal(err)
	}
	b, err = e.eng.CreateBucket(ctx, engine.DefaultBucketSettings("b2"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.PutDesignDoc(ctx, "b2", "d", []byte(`{"views":{"v":{"map":"function (doc, meta) { emit(meta.id, null); }"}}}`)); err != nil {
		t.Fatal(err)
	}
	loadInto(t, b.DefaultCollection(), 50)
	if got, err := queryRows(ctx, e.svc, "b2", "d", "v", "stale=false&limit=0"); err != nil || !strings.Contains(got, `"total_rows":50`) {
		t.Fatalf("the new bucket's view: %s %v, want its 50 rows", got, err)
	}
}
