package index_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/mayflydb/mayfly/index"
	"github.com/mayflydb/mayfly/internal/racebuild"
)

// pagedViews are the views of the paged model test: two with a
// count-and-sum reduce, one map-only.
func pagedViews() []index.ViewConfig {
	return []index.ViewConfig{{Name: "v", Reducer: &countSum{}}, {Name: "w", Reducer: &countSum{}}, {Name: "m"}}
}

// TestModelPaged runs a paged index under a page cache of a few leaves
// against an in-memory index (the reference, itself held to a brute-force
// model by TestModel) through random Applies: inserts, updates and
// deletions of documents with rows in three views and random expirations,
// over enough documents for trees several levels deep. After each step
// they must give the same rows, reductions (every group level, exact
// groups, ranges, keys, descending), totals, live totals and expiry
// forecasts, at random instants with and without expired rows; Check must
// pass (which also finds leaked pages). Now and then the paged index is
// closed and reopened, or a copy of its file is taken (what a crash leaves:
// the last commit) and opened: both must equal the reference, as every
// Apply is logged before it returns, and most copies hold dirty leaves'
// changes only in the log, which Open replays onto the pages; the
// reductions the reopened trees start with are those their pages store.
// Write-backs put their pages (and delete pages freed earlier) in several
// small transactions; copies taken between two of them (a crash before the
// final one) must open to the reference too, with the orphaned pages
// deleted. Each of these cases a seed's steps missed (a copy between page
// transactions holding orphan pages, a crash copy with dirty leaves, a
// reopen loading stored reductions) is driven after the steps, until it
// happened: every run tests them all.
// Rerun a failure with -index.seed=N.
func TestModelPaged(t *testing.T) {
	racebuild.Skip(t)
	seed := *modelSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (rerun with -index.seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	dir := t.TempDir()
	cache := index.NewPageCache(6 << 10) // a few leaves
	// NoSync: a crash copy is the file as the OS holds it (CopyFile), which
	// an fsync does not change; the fsyncs of the many small page
	// transactions took a third of the test's time (108 s under -race on a
	// quiet machine, 70 s without them).
	cfg := index.Config{Path: filepath.Join(dir, "paged.view"), Signature: "paged", NumPartitions: 8, Views: pagedViews(), Cache: cache, NoSync: true}
	ref := openIndex(t, index.Config{NumPartitions: 8, Views: pagedViews()})
	// A crash copy taken between a write-back's page transactions.
	var armMid bool
	var midPath string
	var mids, midOrphans int
	// Leaves of at most 8 rows: trees of three and four levels.
	openPaged := func(cfg index.Config) *index.Index {
		ix := openIndex(t, index.WithPagedLeafRows(cfg, 8))
		// Write back every 50 to 400 documents: most Applies leave dirty
		// leaves in memory, and a crash copy has a log to replay.
		index.SetCheckpointDocs(ix, 50+rng.IntN(350))
		// Page transactions of 1 to 17 KiB: most write-backs take
		// several, and an armed one leaves a copy of the file taken
		// after one of them, before the final one (what a crash there
		// leaves).
		index.SetWriteBackTxBytes(ix, int64(1<<10+rng.IntN(16<<10)))
		index.SetAfterPageTx(ix, func() error {
			if !armMid || midPath != "" {
				return nil
			}
			// Until a copy has held orphan pages, only a transaction
			// of pages (not one of the deletion of pages freed
			// earlier, which leaves none) is taken: the crash between
			// page transactions is tested whatever the seed.
			if midOrphans == 0 {
				if n, err := index.OrphanPages(ix); err != nil || n == 0 {
					return nil
				}
			}
			if rng.IntN(2) == 0 {
				midPath = filepath.Join(dir, fmt.Sprintf("mid%d.view", mids))
				if err := index.CopyFile(ix, midPath); err != nil {
					t.Errorf("CopyFile: %v", err)
				}
			}
			return nil
		})
		return ix
	}
	px := openPaged(cfg)
	ctx := context.Background()
	const t0 = 1_700_000_000
	var seq uint64
	ids := make([]string, 1500)
	for i := range ids {
		ids[i] = fmt.Sprintf("d%04d", i)
	}
	batch := func(n int) []index.DocUpdate {
		var ups []index.DocUpdate
		for range n {
			id := ids[rng.IntN(len(ids))]
			seq++
			u := index.DocUpdate{DocID: id, Partition: uint16(rng.IntN(8)), Seq: seq}
			if rng.IntN(6) == 0 {
				ups = append(ups, u)
				continue
			}
			if rng.IntN(3) == 0 {
				u.Expiration = t0 + int64(rng.IntN(100))
			}
			u.Rows = map[string][]index.Emit{}
			for vi, v := range []string{"v", "w", "m"} {
				for range rng.IntN(4 - vi) {
					u.Rows[v] = append(u.Rows[v], index.Emit{Key: []byte(randKey(rng, 0)), Value: []byte(strconv.Itoa(rng.IntN(10)))})
				}
			}
			ups = append(ups, u)
		}
		return ups
	}
	latest := map[string]index.DocUpdate{} // each document's last update
	both := func(ups []index.DocUpdate) {
		t.Helper()
		for _, u := range ups {
			latest[u.DocID] = u
		}
		if err := ref.Apply(ctx, ups); err != nil {
			t.Fatalf("reference Apply: %v", err)
		}
		if err := px.Apply(ctx, ups); err != nil {
			t.Fatalf("paged Apply: %v", err)
		}
	}
	ms := &model{ids: ids}
	// mappedOff is what a rebuilt paged index's Mapped lacks: the updates
	// mapped before it was built, which the rebuild saw as one each.
	var mappedOff uint64
	compare := func(got, ref *index.Index, where string, check bool) {
		t.Helper()
		for _, view := range []string{"v", "w", "m"} {
			n, _ := ref.TotalRows(view)
			if g, _ := got.TotalRows(view); g != n {
				t.Fatalf("%s: TotalRows(%s) %d, reference %d", where, view, g, n)
			}
			for q := range 12 {
				r := ms.randRange(rng)
				if rng.IntN(2) == 0 {
					r.ExcludeExpired, r.Now = true, t0+int64(rng.IntN(110))-5
				}
				what := fmt.Sprintf("%s: query %d of %s (%s, exclude %v at %d)", where, q, view, showRange(r), r.ExcludeExpired, r.Now)
				equalStrings(t, what, rowsOf(t, got, view, r), rowsOf(t, ref, view, r))
				if view == "m" {
					continue
				}
				g := index.Grouping{Exact: rng.IntN(4) == 0, Level: rng.IntN(4)}
				equalStrings(t, what+fmt.Sprintf(" reduce %+v", g), reduced(t, got, view, r, g), reduced(t, ref, view, r, g))
				if t.Failed() {
					t.FailNow()
				}
			}
			now := t0 + int64(rng.IntN(110)) - 5
			a, err1 := got.LiveRows(ctx, view, now)
			b, err2 := ref.LiveRows(ctx, view, now)
			if err1 != nil || err2 != nil || a != b {
				t.Fatalf("%s: LiveRows(%s, %d) %d %v, reference %d %v", where, view, now, a, err1, b, err2)
			}
			fa, err1 := got.Forecast(ctx, view, index.Range{}, now, 10, 60, true)
			fb, err2 := ref.Forecast(ctx, view, index.Range{}, now, 10, 60, true)
			if err1 != nil || err2 != nil || fmt.Sprint(fa) != fmt.Sprint(fb) {
				t.Fatalf("%s: Forecast(%s) %v %v, reference %v %v", where, view, fa, err1, fb, err2)
			}
		}
		if a, b := fmt.Sprint(got.Seqs()), fmt.Sprint(ref.Seqs()); a != b {
			t.Fatalf("%s: Seqs %s, reference %s", where, a, b)
		}
		if a, b := got.FeedUUID(), ref.FeedUUID(); a != b {
			t.Fatalf("%s: FeedUUID %d, reference %d", where, a, b)
		}
		if a, b := got.Mapped()+mappedOff, ref.Mapped(); a != b {
			t.Fatalf("%s: Mapped %d, reference %d", where, a, b)
		}
		if check { // writes back
			checkIndex(t, got)
		}
	}
	// Enough rows first for inner nodes above the leaves.
	for range 6 {
		both(batch(300))
	}
	if d := index.TreeDepth(px, "v"); d < 3 {
		t.Fatalf("a tree of depth %d: the test wants inner nodes under inner nodes", d)
	}
	compare(px, ref, "loaded", true)
	// checkMid opens the copy taken between two page transactions, if
	// one was, and holds it to the reference: the orphaned pages deleted.
	checkMid := func(where string) {
		t.Helper()
		if midPath == "" {
			return
		}
		// After a transaction of pages, or of the deletion of pages
		// freed earlier (see deleteEarly), which leaves none.
		if n, err := index.FileOrphanPages(midPath); err != nil {
			t.Fatal(err)
		} else if n > 0 {
			midOrphans++
		}
		ccfg := cfg
		ccfg.Path = midPath
		cx := openPaged(ccfg)
		if n, err := index.OrphanPages(cx); err != nil || n != 0 {
			t.Fatalf("%s: %d orphan pages after Open of a copy between page transactions (%v)", where, n, err)
		}
		compare(cx, ref, where+" (crash copy between page transactions)", true)
		closeIndex(t, cx)
		midPath = ""
		mids++
	}
	var reopens, crashes, behind, stored, continued, rebuilds int
	for step := range 60 {
		where := fmt.Sprintf("step %d", step)
		switch rng.IntN(9) {
		case 0:
			closeIndex(t, px) // may leave a log to replay
			px = openPaged(cfg)
			reopens++
			stored += index.CachedReductions(px, "v") // before any query: from the pages
			where += " (reopened)"
		case 1:
			crash := filepath.Join(dir, fmt.Sprintf("crash%d.view", step))
			if err := index.CopyFile(px, crash); err != nil {
				t.Fatal(err)
			}
			ccfg := cfg
			ccfg.Path = crash
			cx := openPaged(ccfg)
			if index.PagedDirty(px) {
				behind++
			}
			compare(cx, ref, where+" (crash copy)", false)
			crashes++
			if rng.IntN(2) == 0 {
				closeIndex(t, cx)
				break
			}
			// Go on with the crash copy, as a server restarted after a
			// kill does: its replayed dirty leaves take the next Applies
			// and write-backs.
			closeIndex(t, px)
			px, cfg = cx, ccfg
			continued++
		case 3:
			// A design document replaced: the index dropped and built
			// again from every document's last update, in batches, in
			// sequence order (as the feed sends them), then the steps go
			// on with it (crash copies of it included).
			closeIndex(t, px)
			cfg.Path = filepath.Join(dir, fmt.Sprintf("rebuilt%d.view", step))
			px = openPaged(cfg)
			ups := slices.SortedFunc(maps.Values(latest), func(a, b index.DocUpdate) int { return cmp.Compare(a.Seq, b.Seq) })
			for len(ups) > 0 {
				n := min(len(ups), 1+rng.IntN(400))
				var upTo []uint64
				if n == len(ups) {
					upTo = ref.Seqs()
				}
				if err := px.ApplyUpTo(ctx, ups[:n], upTo); err != nil {
					t.Fatalf("rebuild Apply: %v", err)
				}
				ups = ups[n:]
			}
			if err := px.SetFeedUUID(ref.FeedUUID()); err != nil {
				t.Fatal(err)
			}
			mappedOff = ref.Mapped() - px.Mapped()
			rebuilds++
			where += " (rebuilt)"
		case 2:
			u := rng.Uint64()
			for _, ix := range []*index.Index{ref, px} {
				if err := ix.SetFeedUUID(u); err != nil {
					t.Fatal(err)
				}
			}
		}
		armMid = midOrphans == 0 || rng.IntN(3) == 0
		both(batch(1 + rng.IntN(120)))
		armMid = false
		checkMid(where)
		compare(px, ref, where, rng.IntN(4) == 0)
	}
	// The cases the steps may have missed (a seed's walk is no promise)
	// are driven now, each until it happened, so every run tests them.
	for i := 0; midOrphans == 0; i++ {
		// No copy between a write-back's transactions held orphan pages:
		// write-backs in page transactions of 1 KiB, armed, until one
		// does (each takes a copy with even odds).
		if i == 100 {
			t.Fatalf("100 write-backs in 1 KiB page transactions left no copy between two of them with orphan pages")
		}
		index.SetWriteBackTxBytes(px, 1<<10)
		armMid = true
		both(batch(120))
		if err := px.WriteBack(); err != nil {
			t.Fatal(err)
		}
		armMid = false
		checkMid(fmt.Sprintf("driven write-back %d", i))
	}
	for i := 0; behind == 0; i++ {
		// No crash copy held dirty leaves (a write-back had just run each
		// time): one more after an Apply of one document, which a
		// write-back follows only past the dirty budget.
		if i == 100 {
			t.Fatalf("100 Applies of one document each left no dirty leaf")
		}
		both(batch(1))
		if index.PagedDirty(px) {
			crash := filepath.Join(dir, "crash-last.view")
			if err := index.CopyFile(px, crash); err != nil {
				t.Fatal(err)
			}
			ccfg := cfg
			ccfg.Path = crash
			cx := openPaged(ccfg)
			compare(cx, ref, "last (crash copy)", false)
			closeIndex(t, cx)
			crashes++
			behind++
		}
	}
	if stored == 0 {
		// No reopen loaded a stored reduction (none ran, or each replayed
		// a log over the root's): one after a write-back, with no log.
		if err := px.WriteBack(); err != nil {
			t.Fatal(err)
		}
		closeIndex(t, px)
		px = openPaged(cfg)
		reopens++
		stored += index.CachedReductions(px, "v")
		compare(px, ref, "reopened after a write-back", false)
	}
	compare(px, ref, "end", true)
	st := cache.Stats()
	t.Logf("%d reopens, %d crash copies (%d with a log to replay, %d continued, %d between a write-back's transactions, %d of them with orphan pages), %d rebuilds; cache %d/%d bytes, %d pages, %d hits, %d misses", reopens, crashes, behind, continued, mids, midOrphans, rebuilds, st.Used, st.Budget, st.Pages, st.Hits, st.Misses)
	if midOrphans == 0 {
		t.Fatalf("no copy between a write-back's transactions held orphan pages: the crash between page transactions was not tested")
	}
	if stored == 0 {
		t.Fatalf("%d reopens loaded no stored reduction: the reduces after them did not test the pages' reductions", reopens)
	}
	if behind == 0 {
		t.Fatalf("no crash copy was taken with dirty leaves in memory: the log's replay was not tested")
	}
	if st.Misses == 0 {
		t.Fatalf("a cache of %d bytes never missed: the pages were not read from the file", st.Budget)
	}
}

// TestPagedReaderKeepsSnapshot holds a query on a paged index (tiny cache)
// in the middle of its rows while Applies replace every row, many times
// over: the query must go on reading its own snapshot, whose pages the
// Applies dropped, to the end; once it returns, those pages are deleted
// (Check finds no page that is neither in a tree nor pending deletion, and
// the file's pages shrink back).
func TestPagedReaderKeepsSnapshot(t *testing.T) {
	ctx := context.Background()
	cfg := index.Config{Path: filepath.Join(t.TempDir(), "p.view"), Signature: "s", NumPartitions: 4,
		Views: []index.ViewConfig{{Name: "v", Reducer: &countSum{}}}, Cache: index.NewPageCache(1)}
	ix := openIndex(t, cfg)
	index.SetCheckpointDocs(ix, 1) // every Apply writes back
	gen := func(round int) []index.DocUpdate {
		var ups []index.DocUpdate
		for i := range 2000 {
			ups = append(ups, index.DocUpdate{DocID: fmt.Sprintf("d%05d", i), Seq: uint64(round*2000 + i + 1),
				Rows: map[string][]index.Emit{"v": emits(strconv.Itoa(i), strconv.Itoa(round))}})
		}
		return ups
	}
	apply(t, ix, gen(0)...)
	want := rowsOf(t, ix, "v", index.Range{})
	var got []string
	paused, resume := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- ix.Query(ctx, "v", index.Range{}, func(r index.Row) error {
			if len(got) == 100 {
				close(paused)
				<-resume
			}
			got = append(got, fmt.Sprintf("%s %s %s", r.Key, r.DocID, r.Value))
			return nil
		})
	}()
	<-paused
	for round := 1; round <= 3; round++ {
		apply(t, ix, gen(round)...)
	}
	held := index.PageCount(ix)
	checkIndex(t, ix)
	close(resume)
	if err := <-done; err != nil {
		t.Fatalf("Query over a snapshot whose pages were dropped: %v", err)
	}
	equalStrings(t, "rows of the held snapshot", got, want)
	apply(t, ix, gen(4)...) // deletes what no reader needs now
	apply(t, ix, gen(5)...)
	after := index.PageCount(ix)
	checkIndex(t, ix)
	if after >= held {
		t.Fatalf("pages: %d while a reader held an old snapshot, %d after: dropped pages were not deleted", held, after)
	}
	equalStrings(t, "rows after", reduced(t, ix, "v", index.Range{}, index.Grouping{}), []string{"null [2000,10000]"})
}

// TestPagedFileBounded updates the same documents over and over: the file
// of a paged index must stop growing (dropped pages are deleted and bbolt
// reuses their space). It measures the space bbolt has put pages in (the
// file's size doubles: a use just past a power of two doubles it once).
func TestPagedFileBounded(t *testing.T) {
	cfg := index.Config{Path: filepath.Join(t.TempDir(), "p.view"), Signature: "s", NumPartitions: 4,
		Views: []index.ViewConfig{{Name: "v", Reducer: &countSum{}}}, Cache: index.NewPageCache(64 << 10)}
	ix := openIndex(t, cfg)
	index.SetCheckpointDocs(ix, 1) // every Apply writes back
	rng := rand.New(rand.NewPCG(1, 2))
	var sizes []int64
	for round := range 100 {
		var ups []index.DocUpdate
		for range 500 {
			i := rng.IntN(3000)
			ups = append(ups, index.DocUpdate{DocID: fmt.Sprintf("d%05d", i), Seq: uint64(round + 1),
				Rows: map[string][]index.Emit{"v": emits(strconv.Itoa(rng.IntN(100000)), "1")}})
		}
		apply(t, ix, ups...)
		if round%10 == 9 {
			sizes = append(sizes, index.FileUsed(t, ix))
		}
	}
	checkIndex(t, ix)
	// Once every document exists, 70 more rounds must not grow the used
	// space by more than a quarter.
	if last, mid := sizes[len(sizes)-1], sizes[2]; last > mid+mid/4 {
		t.Fatalf("file sizes every 10 rounds %v: it grows under updates", sizes)
	}
	t.Logf("file sizes every 10 rounds: %v", sizes)
}

// TestPagedLayoutSwitch opens a file written unpaged as paged, and back:
// each time the index starts empty at sequence 0 (to be rebuilt from the
// feed), as after a change of signature, and then works.
func TestPagedLayoutSwitch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.view")
	views := []index.ViewConfig{{Name: "v", Reducer: &countSum{}}}
	for i, cache := range []*index.PageCache{nil, index.NewPageCache(1 << 20), nil} {
		cfg := index.Config{Path: path, Signature: "s", NumPartitions: 4, Views: views, Cache: cache}
		ix, err := index.Open(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := ix.TotalRows("v"); n != 0 || ix.Seqs()[0] != 0 {
			t.Fatalf("open %d: %d rows at %v after a layout change", i, n, ix.Seqs())
		}
		apply(t, ix, index.DocUpdate{DocID: "a", Seq: 5, Rows: map[string][]index.Emit{"v": emits(`1`, `2`)}})
		checkIndex(t, ix)
		if err := ix.Close(); err != nil {
			t.Fatal(err)
		}
		ix, err = index.Open(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		equalStrings(t, "reopened", rowsOf(t, ix, "v", index.Range{}), []string{"1 a 2"})
		checkIndex(t, ix)
		if err := ix.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPagedMissingPage: a page missing from the file, or one whose bytes
// changed (its checksum fails), is an error wrapping ErrCorrupt from the
// query that needs it, not a crash.
func TestPagedMissingPage(t *testing.T) {
	t.Run("missing", func(t *testing.T) { testPagedBadPage(t, index.DeleteLeafPage) })
	t.Run("changed", func(t *testing.T) { testPagedBadPage(t, index.FlipLeafPageByte) })
}

func testPagedBadPage(t *testing.T, damage func(*index.Index, string) error) {
	cfg := index.Config{Path: filepath.Join(t.TempDir(), "p.view"), Signature: "s", NumPartitions: 4,
		Views: []index.ViewConfig{{Name: "v", Reducer: &countSum{}}}, Cache: index.NewPageCache(1)}
	ix, err := index.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	index.SetCheckpointDocs(ix, 1) // every Apply writes back
	var ups []index.DocUpdate
	for i := range 500 {
		ups = append(ups, index.DocUpdate{DocID: fmt.Sprintf("d%04d", i), Seq: 1, Rows: map[string][]index.Emit{"v": emits(strconv.Itoa(i), "1")}})
	}
	apply(t, ix, ups...)
	if err := damage(ix, "v"); err != nil {
		t.Fatal(err)
	}
	err = ix.Query(context.Background(), "v", index.Range{}, func(index.Row) error { return nil })
	if !errors.Is(err, index.ErrCorrupt) {
		t.Fatalf("Query over a missing page: %v, want ErrCorrupt", err)
	}
	err = ix.Reduce(context.Background(), "v", index.Range{}, index.Grouping{Level: 1}, func(_, _ []byte) error { return nil })
	if !errors.Is(err, index.ErrCorrupt) {
		t.Fatalf("Reduce over a missing page: %v, want ErrCorrupt", err)
	}
	if err := ix.Check(context.Background()); !errors.Is(err, index.ErrCorrupt) && !errors.Is(err, index.ErrCheck) {
		t.Fatalf("Check over a missing page: %v", err)
	}
}

// TestPagedConcurrent runs queries and reduces on a paged index (tiny
// cache) while Applies rewrite every row again and again, and Check runs
// too: each answer must be one whole snapshot (every row of one round),
// never an error, and Check must pass.
func TestPagedConcurrent(t *testing.T) {
	testPagedConcurrent(t, func(*index.Index) {})
}

// TestPagedConcurrentMapRelease is TestPagedConcurrent with the file's
// mapped pages released after every read and write-back (see mapRelease),
// while queries, Applies and Checks read through the map: every answer
// must stay whole and of one round.
func TestPagedConcurrentMapRelease(t *testing.T) {
	var ix *index.Index
	testPagedConcurrent(t, func(x *index.Index) {
		ix = x
		index.SetMapReleaseLimit(ix, 1)
	})
	n, err := index.MapReleases(ix)
	if err != nil || n < 40 {
		t.Fatalf("%d releases of the mapped pages, last error %v; want one after each query and write-back", n, err)
	}
}

func testPagedConcurrent(t *testing.T, setup func(*index.Index)) {
	ctx := context.Background()
	cfg := index.Config{Path: filepath.Join(t.TempDir(), "p.view"), Signature: "s", NumPartitions: 4,
		Views: []index.ViewConfig{{Name: "v", Reducer: &countSum{}}}, Cache: index.NewPageCache(8 << 10)}
	ix := openIndex(t, cfg)
	setup(ix)
	const docs = 400
	round := func(r int) []index.DocUpdate {
		var ups []index.DocUpdate
		for i := range docs {
			ups = append(ups, index.DocUpdate{DocID: fmt.Sprintf("d%05d", i), Seq: uint64(r*docs + i + 1),
				Rows: map[string][]index.Emit{"v": emits(strconv.Itoa((i*7919+r)%1000), strconv.Itoa(r))}})
		}
		return ups
	}
	apply(t, ix, round(1)...)
	stop := make(chan struct{})
	errs := make(chan error, 4)
	for w := range 3 {
		go func() {
			for q := 0; ; q++ {
				select {
				case <-stop:
					errs <- nil
					return
				default:
				}
				var vals []string
				err := ix.Query(ctx, "v", index.Range{Descending: (q+w)%2 == 0}, func(r index.Row) error {
					vals = append(vals, string(r.Value))
					return nil
				})
				if err == nil && len(vals) != docs {
					err = fmt.Errorf("query saw %d rows", len(vals))
				}
				for _, v := range vals {
					if err == nil && v != vals[0] {
						err = fmt.Errorf("query mixed rounds %s and %s", vals[0], v)
					}
				}
				if err == nil {
					err = ix.Reduce(ctx, "v", index.Range{}, index.Grouping{}, func(_, v []byte) error {
						c, s, err := parseCountSum(v)
						if err == nil && (c != docs || s%docs != 0) {
							err = fmt.Errorf("reduce %s mixes rounds", v)
						}
						return err
					})
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	checks := make(chan error, 1)
	go func() { // Check while queries and Applies run
		var err error
		for range 5 {
			if err = ix.Check(ctx); err != nil {
				break
			}
		}
		checks <- err
	}()
	for r := 2; r <= 40; r++ {
		apply(t, ix, round(r)...)
	}
	if err := <-checks; err != nil {
		t.Fatalf("Check during queries and Applies: %v", err)
	}
	close(stop)
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	checkIndex(t, ix)
}

// TestPagedDurableAtApply: a paged index writes its pages back lazily but
// logs every Apply before it returns, so ApplyDurable's callback (a feed
// consumer's acknowledgement) runs at once, and what a crash leaves (a copy
// of the file) holds every acknowledged Apply: before a write-back in the
// log only, replayed onto the pages by Open, and after one in the pages.
func TestPagedDurableAtApply(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg := index.Config{Path: filepath.Join(dir, "p.view"), Signature: "s", NumPartitions: 1,
		Views: []index.ViewConfig{{Name: "v", Reducer: &countSum{}}}, Cache: index.NewPageCache(1 << 20)}
	ix := openIndex(t, cfg)
	index.SetCheckpointDocs(ix, 10)
	var acked []uint64
	applyN := func(from, n int) {
		t.Helper()
		var ups []index.DocUpdate
		for i := from; i < from+n; i++ {
			ups = append(ups, index.DocUpdate{DocID: fmt.Sprintf("d%03d", i), Seq: uint64(i + 1),
				Rows: map[string][]index.Emit{"v": emits(strconv.Itoa(i), "1")}})
		}
		seq := uint64(from + n)
		if err := ix.ApplyDurable(ctx, ups, nil, func() { acked = append(acked, seq) }); err != nil {
			t.Fatal(err)
		}
	}
	crash := func(name string) (seq uint64, rows int, sum []string) {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := index.CopyFile(ix, path); err != nil {
			t.Fatal(err)
		}
		ccfg := cfg
		ccfg.Path, ccfg.Cache = path, index.NewPageCache(1<<20)
		cx := openIndex(t, ccfg)
		defer closeIndex(t, cx)
		n, _ := cx.TotalRows("v")
		return cx.Seqs()[0], n, reduced(t, cx, "v", index.Range{}, index.Grouping{})
	}
	applyN(0, 4)
	if !index.PagedDirty(ix) {
		t.Fatal("4 of 10 documents were written back: the test wants them in the log only")
	}
	if seq, n, sum := crash("c1"); fmt.Sprint(acked) != "[4]" || seq != 4 || n != 4 || fmt.Sprint(sum) != "[null "+string(countSumJSON(4, 4))+"]" {
		t.Fatalf("after 4 documents, logged: acknowledged %v; a crash copy holds %d rows at %d, reduce %v", acked, n, seq, sum)
	}
	applyN(4, 6)
	if index.PagedDirty(ix) {
		t.Fatal("10 documents were not written back")
	}
	if seq, n, _ := crash("c2"); fmt.Sprint(acked) != "[4 10]" || seq != 10 || n != 10 {
		t.Fatalf("after a write-back at 10 documents: acknowledged %v; a crash copy holds %d rows at %d", acked, n, seq)
	}
	applyN(10, 1)
	if fmt.Sprint(acked) != "[4 10 11]" {
		t.Fatalf("acknowledged %v, want [4 10 11]", acked)
	}
	if err := ix.Close(); err != nil { // one logged document: left in the log
		t.Fatal(err)
	}
	ix = openIndex(t, cfg)
	defer closeIndex(t, ix)
	if n, _ := ix.TotalRows("v"); n != 11 || ix.Seqs()[0] != 11 || !index.PagedDirty(ix) {
		t.Fatalf("reopened: %d rows at %v (dirty %v), want 11 at 11 replayed from the log", n, ix.Seqs(), index.PagedDirty(ix))
	}
}

// TestPagedStoredReductions: a paged index's pages store its nodes'
// reductions, so that after a reopen a reduce of whole subtrees reads no
// leaf: the whole view's reduce reads none, and a group_level=1 reduce
// reads only the leaves at its groups' edges, far fewer than the tree has;
// a reduce that leaves out expired rows gives the exact answer from the
// same stored reductions. The answers equal the in-memory index's.
func TestPagedStoredReductions(t *testing.T) {
	cache := index.NewPageCache(64 << 10)
	cfg := index.WithPagedLeafRows(index.Config{Path: filepath.Join(t.TempDir(), "p.view"), Signature: "s", NumPartitions: 4,
		Views: []index.ViewConfig{{Name: "v", Reducer: &countSum{}}}, Cache: cache}, 8)
	ref := openIndex(t, index.Config{NumPartitions: 4, Views: []index.ViewConfig{{Name: "v", Reducer: &countSum{}}}})
	ix := openIndex(t, cfg)
	const t0 = 1_700_000_000
	var ups []index.DocUpdate
	for i := range 2000 {
		u := index.DocUpdate{DocID: fmt.Sprintf("d%04d", i), Seq: uint64(i + 1),
			Rows: map[string][]index.Emit{"v": emits(fmt.Sprintf(`["g%d",%d]`, i%10, i), strconv.Itoa(i%7))}}
		if i%5 == 0 {
			u.Expiration = t0 + int64(i%50)
		}
		ups = append(ups, u)
	}
	apply(t, ix, ups...)
	apply(t, ref, ups...)
	if err := ix.WriteBack(); err != nil { // pages with their reductions
		t.Fatal(err)
	}
	closeIndex(t, ix)
	ix = openIndex(t, cfg)
	before := cache.Stats()
	whole := reduced(t, ix, "v", index.Range{}, index.Grouping{})
	if st := cache.Stats(); st.Misses != before.Misses || st.Hits != before.Hits {
		t.Fatalf("the whole view's reduce after a reopen read %d pages: its reduction is not stored", st.Misses-before.Misses+st.Hits-before.Hits)
	}
	equalStrings(t, "whole view", whole, reduced(t, ref, "v", index.Range{}, index.Grouping{}))
	before = cache.Stats()
	for _, desc := range []bool{false, true} {
		r := index.Range{Descending: desc}
		equalStrings(t, fmt.Sprintf("group_level=1 descending %v", desc), reduced(t, ix, "v", r, index.Grouping{Level: 1}),
			reduced(t, ref, "v", r, index.Grouping{Level: 1}))
	}
	// 10 groups, each read at its edges, both ways: a few leaves per
	// group, where reducing every leaf would read each of them.
	leaves := index.LeafCount(ix, "v")
	if st := cache.Stats(); st.Misses+st.Hits-before.Misses-before.Hits > uint64(leaves/2) {
		t.Fatalf("group_level=1 reduces read %d pages of %d leaves: subtrees' reductions are not stored", st.Misses+st.Hits-before.Misses-before.Hits, leaves)
	}
	for _, now := range []int64{t0 - 1, t0 + 20, t0 + 60} {
		r := index.Range{ExcludeExpired: true, Now: now}
		equalStrings(t, fmt.Sprintf("live at %d", now), reduced(t, ix, "v", r, index.Grouping{}), reduced(t, ref, "v", r, index.Grouping{}))
		equalStrings(t, fmt.Sprintf("live groups at %d", now), reduced(t, ix, "v", r, index.Grouping{Level: 1}), reduced(t, ref, "v", r, index.Grouping{Level: 1}))
	}
	checkIndex(t, ix)
	closeIndex(t, ix)
}

// TestPagedSharedDirtyBudget: the paged indexes of one cache share its
// dirty budget. When their dirty leaves reach it, the index holding the
// most writes back, not a small one whose Apply happened to cross it.
func TestPagedSharedDirtyBudget(t *testing.T) {
	cache := index.NewPageCache(1 << 20).SetDirtyBudget(1 << 20) // the least dirty budget
	dir := t.TempDir()
	open := func(name string) *index.Index {
		ix := openIndex(t, index.Config{Path: filepath.Join(dir, name), Signature: "s", NumPartitions: 1,
			Views: []index.ViewConfig{{Name: "v", Reducer: &countSum{}}}, Cache: cache})
		index.SetCheckpointDocs(ix, 1<<30) // only the dirty budget writes back
		return ix
	}
	big, small := open("big"), open("small")
	seq := uint64(0)
	applyTo := func(ix *index.Index, n int) {
		t.Helper()
		var ups []index.DocUpdate
		for range n {
			seq++
			ups = append(ups, index.DocUpdate{DocID: fmt.Sprintf("d%06d", seq), Seq: seq,
				Rows: map[string][]index.Emit{"v": emits(strconv.Itoa(int(seq)), "1")}})
		}
		apply(t, ix, ups...)
	}
	// The big index up to just under the budget.
	for index.DirtyBytes(big) < 900<<10 {
		applyTo(big, 100)
	}
	if !index.PagedDirty(big) {
		t.Fatal("the big index wrote back under the budget")
	}
	// The small index crosses it: it holds far less than half.
	for index.DirtyBytes(big)+index.DirtyBytes(small) < 1<<20 {
		applyTo(small, 20)
		if !index.PagedDirty(small) {
			t.Fatalf("the small index (%d bytes dirty) wrote back for the big one's %d", index.DirtyBytes(small), index.DirtyBytes(big))
		}
	}
	applyTo(small, 20)
	if !index.PagedDirty(small) || !index.PagedDirty(big) {
		t.Fatal("the small index wrote back past the budget")
	}
	applyTo(big, 1)
	if index.PagedDirty(big) {
		t.Fatal("past the shared budget, the big index did not write back")
	}
	checkIndex(t, big)
	checkIndex(t, small)
}

// TestPagedEmptiedTree: a paged tree whose rows are all deleted after its
// pages were written (a leaf holding only deletions against its page) is
// written back as an empty tree, its pages freed (Check finds none left
// over), and reopens empty and usable.
func TestPagedEmptiedTree(t *testing.T) {
	cfg := index.Config{Path: filepath.Join(t.TempDir(), "p.view"), Signature: "s", NumPartitions: 1,
		Views: []index.ViewConfig{{Name: "v", Reducer: &countSum{}}}, Cache: index.NewPageCache(1 << 20)}
	ix := openIndex(t, cfg)
	doc := func(id string, seq uint64, rows map[string][]index.Emit) index.DocUpdate {
		return index.DocUpdate{DocID: id, Seq: seq, Rows: rows}
	}
	apply(t, ix, doc("a", 1, map[string][]index.Emit{"v": emits(`1`, `1`)}), doc("b", 2, map[string][]index.Emit{"v": emits(`2`, `1`)}))
	checkIndex(t, ix) // writes back
	apply(t, ix, doc("a", 3, nil), doc("b", 4, nil))
	if n, _ := ix.TotalRows("v"); n != 0 {
		t.Fatalf("%d rows after deleting both documents", n)
	}
	checkIndex(t, ix) // the leaf's page is pending deletion, listed free
	closeIndex(t, ix)
	ix = openIndex(t, cfg)
	defer closeIndex(t, ix)
	if n, _ := ix.TotalRows("v"); n != 0 || ix.Seqs()[0] != 4 {
		t.Fatalf("reopened: %d rows at %v, want none at 4", n, ix.Seqs())
	}
	if n := index.PageCount(ix); n != 0 {
		t.Fatalf("an emptied index keeps %d pages after a reopen", n)
	}
	apply(t, ix, doc("c", 5, map[string][]index.Emit{"v": emits(`3`, `2`)}))
	equalStrings(t, "after the reopen", reduced(t, ix, "v", index.Range{}, index.Grouping{}), []string{"null " + string(countSumJSON(1, 2))})
	checkIndex(t, ix)
}

// TestPagedWriteBackSplit: a write-back puts its new pages in transactions
// of a bounded size before the final one that switches the roots. With a
// bound of a few pages, a build's write-back makes several, and the index
// answers as the in-memory one does, after a reopen too. A copy of the file
// taken between two of them (what a crash there leaves: pages no root
// reaches, at or above the stored next page id) opens to the state before
// the write-back, its log replayed, with those orphan pages deleted, and
// passes Check; so does the same copy after a write-back of its own.
func TestPagedWriteBackSplit(t *testing.T) {
	views := []index.ViewConfig{{Name: "v", Reducer: &countSum{}}, {Name: "m"}}
	dir := t.TempDir()
	cfg := index.WithPagedLeafRows(index.Config{Path: filepath.Join(dir, "p.view"), Signature: "s", NumPartitions: 4,
		Views: views, Cache: index.NewPageCache(64 << 10)}, 8)
	ref := openIndex(t, index.Config{NumPartitions: 4, Views: views})
	ix := openIndex(t, cfg)
	index.SetWriteBackTxBytes(ix, 2<<10)
	crash := filepath.Join(dir, "crash.view")
	copies := 0
	index.SetAfterPageTx(ix, func() error {
		// The second transaction of pages (not of deletions).
		if n, _ := index.OrphanPages(ix); n > 0 {
			if copies++; copies == 2 {
				if err := index.CopyFile(ix, crash); err != nil {
					t.Errorf("CopyFile: %v", err)
				}
			}
		}
		return nil
	})
	const t0 = 1_700_000_000
	var ups []index.DocUpdate
	for i := range 1500 {
		u := index.DocUpdate{DocID: fmt.Sprintf("d%04d", (i*7919)%1500), Seq: uint64(i + 1),
			Rows: map[string][]index.Emit{
				"v": emits(fmt.Sprintf(`["g%d",%d]`, i%10, i), strconv.Itoa(i%7)),
				"m": emits(strconv.Itoa(i%97), `"x"`),
			}}
		if i%5 == 0 {
			u.Expiration = t0 + int64(i%50)
		}
		ups = append(ups, u)
	}
	apply(t, ix, ups...)
	apply(t, ref, ups...)
	if err := ix.WriteBack(); err != nil {
		t.Fatal(err)
	}
	txs := index.WriteBackPageTxs(ix)
	if txs < 3 {
		t.Fatalf("a write-back of %d pages under a bound of 2 KiB made %d page transactions", index.PageCount(ix), txs)
	}
	same := func(ix *index.Index, where string) {
		t.Helper()
		for _, view := range []string{"v", "m"} {
			equalStrings(t, where+": rows of "+view, rowsOf(t, ix, view, index.Range{}), rowsOf(t, ref, view, index.Range{}))
		}
		for _, g := range []index.Grouping{{}, {Level: 1}, {Exact: true}} {
			equalStrings(t, fmt.Sprintf("%s: reduce %+v", where, g), reduced(t, ix, "v", index.Range{}, g), reduced(t, ref, "v", index.Range{}, g))
		}
		r := index.Range{ExcludeExpired: true, Now: t0 + 25}
		equalStrings(t, where+": live reduce", reduced(t, ix, "v", r, index.Grouping{Level: 1}), reduced(t, ref, "v", r, index.Grouping{Level: 1}))
		if a, b := fmt.Sprint(ix.Seqs()), fmt.Sprint(ref.Seqs()); a != b {
			t.Fatalf("%s: Seqs %s, reference %s", where, a, b)
		}
		checkIndex(t, ix)
		if n, err := index.OrphanPages(ix); err != nil || n != 0 {
			t.Fatalf("%s: %d orphan pages (%v)", where, n, err)
		}
	}
	same(ix, "split write-back")
	closeIndex(t, ix)
	ix = openIndex(t, cfg)
	same(ix, "reopened")

	n, err := index.FileOrphanPages(crash)
	if err != nil || n == 0 {
		t.Fatalf("the copy between page transactions holds %d orphan pages (%v): not taken mid write-back", n, err)
	}
	ccfg := cfg
	ccfg.Path = crash
	cx := openIndex(t, ccfg)
	if n, err := index.OrphanPages(cx); err != nil || n != 0 {
		t.Fatalf("the crash copy holds %d orphan pages after Open (%v)", n, err)
	}
	if !index.PagedDirty(cx) {
		t.Fatalf("the crash copy replayed no log: it held the write-back's final state")
	}
	same(cx, "crash copy")
	if err := cx.WriteBack(); err != nil {
		t.Fatal(err)
	}
	same(cx, "crash copy written back")
}

// TestPagedWriteBackSplitFails: a write-back that fails after some of its
// page transactions committed loses nothing: the index answers as before,
// its dirty state stays for the next write-back, which succeeds (with fewer
// pages, after deletions), and neither Check nor a reopen finds a leak; the
// pages the failed one left at or above the stored next page id are gone
// after the reopen.
func TestPagedWriteBackSplitFails(t *testing.T) {
	views := []index.ViewConfig{{Name: "v", Reducer: &countSum{}}}
	cfg := index.WithPagedLeafRows(index.Config{Path: filepath.Join(t.TempDir(), "p.view"), Signature: "s", NumPartitions: 4,
		Views: views, Cache: index.NewPageCache(64 << 10)}, 8)
	ref := openIndex(t, index.Config{NumPartitions: 4, Views: views})
	ix := openIndex(t, cfg)
	index.SetCheckpointDocs(ix, 1<<30)
	index.SetWriteBackTxBytes(ix, 2<<10)
	errInjected := errors.New("injected")
	txs := 0
	index.SetAfterPageTx(ix, func() error {
		if txs++; txs == 3 {
			return errInjected
		}
		return nil
	})
	var ups []index.DocUpdate
	for i := range 1000 {
		ups = append(ups, index.DocUpdate{DocID: fmt.Sprintf("d%04d", i), Seq: uint64(i + 1),
			Rows: map[string][]index.Emit{"v": emits(strconv.Itoa(i), strconv.Itoa(i%7))}})
	}
	apply(t, ix, ups...)
	apply(t, ref, ups...)
	if err := ix.WriteBack(); !errors.Is(err, errInjected) {
		t.Fatalf("WriteBack: %v, want the injected failure", err)
	}
	if !index.PagedDirty(ix) {
		t.Fatal("a failed write-back dropped the dirty state")
	}
	same := func(where string) {
		t.Helper()
		equalStrings(t, where+": rows", rowsOf(t, ix, "v", index.Range{}), rowsOf(t, ref, "v", index.Range{}))
		equalStrings(t, where+": reduce", reduced(t, ix, "v", index.Range{}, index.Grouping{}), reduced(t, ref, "v", index.Range{}, index.Grouping{}))
	}
	same("after the failure")
	if n, _ := index.OrphanPages(ix); n == 0 {
		t.Fatal("the failed write-back left no page: it failed before committing pages")
	}
	index.SetAfterPageTx(ix, nil)
	ups = ups[:0]
	for i := range 900 {
		ups = append(ups, index.DocUpdate{DocID: fmt.Sprintf("d%04d", i), Seq: uint64(2000 + i)})
	}
	apply(t, ix, ups...)
	apply(t, ref, ups...)
	if err := ix.WriteBack(); err != nil {
		t.Fatal(err)
	}
	same("written back")
	checkIndex(t, ix)
	if n, _ := index.OrphanPages(ix); n == 0 {
		t.Fatal("the smaller write-back overwrote every page the failed one left: Check's leniency was not tested")
	}
	closeIndex(t, ix)
	ix = openIndex(t, cfg)
	if n, err := index.OrphanPages(ix); err != nil || n != 0 {
		t.Fatalf("%d orphan pages after Open (%v)", n, err)
	}
	same("reopened")
}

// TestPagedWriteBackBackIndexCrash: a write-back puts the back index's
// changes in bounded transactions before its final one. A copy of the file
// taken between two of them (what a crash there leaves: part of the back
// index already at the Applies' state, the roots and the log of before)
// opens to the index the Applies made, as the in-memory one has it, passes
// Check, and writes back; so does a copy taken after a write-back failed
// in its back-index transactions, more Applies changed the same
// documents, and the next attempt committed one of its own (it keeps the
// entries the failed one saved, not what that one wrote).
func TestPagedWriteBackBackIndexCrash(t *testing.T) {
	views := []index.ViewConfig{{Name: "v", Reducer: &countSum{}}}
	dir := t.TempDir()
	cfg := index.WithPagedLeafRows(index.Config{Path: filepath.Join(dir, "p.view"), Signature: "s", NumPartitions: 4,
		Views: views, Cache: index.NewPageCache(64 << 10), NoSync: true}, 8)
	ref := openIndex(t, index.Config{NumPartitions: 4, Views: views})
	ix := openIndex(t, cfg)
	index.SetCheckpointDocs(ix, 1<<30)
	index.SetWriteBackTxBytes(ix, 16<<10) // 4 back-index entries a transaction
	seq := uint64(0)
	// round r gives document i rows whose keys depend on r, so that a
	// replay reading an entry of the wrong round leaves rows behind.
	round := func(r, from, to int) []index.DocUpdate {
		var ups []index.DocUpdate
		for i := from; i < to; i++ {
			seq++
			u := index.DocUpdate{DocID: fmt.Sprintf("d%04d", (i*7919)%400), Seq: seq}
			if (i+r)%9 != 0 { // else: no rows now
				u.Rows = map[string][]index.Emit{"v": emits(
					fmt.Sprintf(`[%d,%d]`, r, i), strconv.Itoa(i%7),
					fmt.Sprintf(`"r%d-%d"`, r, i%13), "1")}
			}
			ups = append(ups, u)
		}
		apply(t, ix, ups...)
		apply(t, ref, ups...)
		return ups
	}
	same := func(ix *index.Index, where string) {
		t.Helper()
		equalStrings(t, where+": rows", rowsOf(t, ix, "v", index.Range{}), rowsOf(t, ref, "v", index.Range{}))
		for _, g := range []index.Grouping{{}, {Level: 1}} {
			equalStrings(t, fmt.Sprintf("%s: reduce %+v", where, g), reduced(t, ix, "v", index.Range{}, g), reduced(t, ref, "v", index.Range{}, g))
		}
		if a, b := fmt.Sprint(ix.Seqs()), fmt.Sprint(ref.Seqs()); a != b {
			t.Fatalf("%s: Seqs %s, reference %s", where, a, b)
		}
	}
	// reopen opens a copy of the file a crash left, checks that it is
	// mid write-back and opens to the reference's state, and writes it back.
	reopen := func(path, where string) {
		t.Helper()
		if n, err := index.FileBackUndo(path); err != nil || n == 0 {
			t.Fatalf("%s: the copy saves %d back-index entries (%v): not taken mid back index", where, n, err)
		}
		ccfg := cfg
		ccfg.Path = path
		cx := openIndex(t, ccfg)
		if !index.PagedDirty(cx) {
			t.Fatalf("%s: the copy replayed no log: it held the write-back's final state", where)
		}
		same(cx, where)
		if err := cx.WriteBack(); err != nil {
			t.Fatal(err)
		}
		same(cx, where+", written back")
		checkIndex(t, cx)
		closeIndex(t, cx)
		cx = openIndex(t, ccfg)
		same(cx, where+", reopened")
	}

	round(0, 0, 400)
	if err := ix.WriteBack(); err != nil {
		t.Fatal(err)
	}
	// A crash between two back-index transactions.
	round(1, 0, 300)
	crash := filepath.Join(dir, "crash.view")
	copied := false
	second := index.WriteBackBackTxs(ix) + 2
	index.SetAfterPageTx(ix, func() error {
		if !copied && index.HookBackTxs(ix) >= second {
			copied = true
			if err := index.CopyFile(ix, crash); err != nil {
				t.Errorf("CopyFile: %v", err)
			}
		}
		return nil
	})
	if err := ix.WriteBack(); err != nil {
		t.Fatal(err)
	}
	same(ix, "written back")
	reopen(crash, "crash between back-index transactions")

	// A failure there, more Applies, and a crash in the next attempt.
	round(2, 100, 400)
	errInjected := errors.New("injected")
	fail := index.WriteBackBackTxs(ix) + 3
	index.SetAfterPageTx(ix, func() error {
		if index.HookBackTxs(ix) == fail {
			return errInjected
		}
		return nil
	})
	if err := ix.WriteBack(); !errors.Is(err, errInjected) {
		t.Fatalf("WriteBack: %v, want the injected failure", err)
	}
	same(ix, "after the failure")
	round(3, 0, 200)
	crash2 := filepath.Join(dir, "crash2.view")
	last := index.WriteBackBackTxs(ix)
	index.SetAfterPageTx(ix, func() error {
		// After each back-index transaction: the copy left is the
		// last before the final one.
		if n := index.HookBackTxs(ix); n > last {
			last = n
			if err := index.CopyFile(ix, crash2); err != nil {
				t.Errorf("CopyFile: %v", err)
			}
		}
		return nil
	})
	if err := ix.WriteBack(); err != nil {
		t.Fatal(err)
	}
	index.SetAfterPageTx(ix, nil)
	same(ix, "written back after the failure")
	checkIndex(t, ix)
	reopen(crash2, "crash in the attempt after a failed one")
}

// TestPagedWriteBackKeepsQuarter: a write-back puts in the cache at most a
// quarter of its budget of the leaves it wrote (it no longer holds every
// page it wrote to its end for that); the other leaves are read from the
// file, and the index answers as before.
func TestPagedWriteBackKeepsQuarter(t *testing.T) {
	const budget = 1 << 20
	cache := index.NewPageCache(budget).SetDirtyBudget(4 << 20) // a write-back of more than the cache holds
	ix := openIndex(t, index.Config{Path: filepath.Join(t.TempDir(), "ix"), Signature: "s", NumPartitions: 1,
		Views: []index.ViewConfig{{Name: "v", Reducer: &countSum{}}}, Cache: cache})
	index.SetCheckpointDocs(ix, 1<<30) // only the dirty budget writes back
	seq := uint64(0)
	for written := false; !written; {
		var ups []index.DocUpdate
		for range 200 {
			seq++
			ups = append(ups, index.DocUpdate{DocID: fmt.Sprintf("d%06d", seq), Seq: seq,
				Rows: map[string][]index.Emit{"v": emits(strconv.Itoa(int(seq)), "1")}})
		}
		apply(t, ix, ups...)
		written = !index.PagedDirty(ix) && seq > 200
	}
	// The cache counts a leaf's decoded rows, less than twice its page.
	if used := cache.Stats().Used; used > budget/2 {
		t.Errorf("after a write-back of %d documents the cache holds %d bytes of a %d budget, want at most half (a quarter of pages)", seq, used, budget)
	}
	checkIndex(t, ix)
}
