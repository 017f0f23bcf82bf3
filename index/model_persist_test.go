package index_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/index"
	"github.com/mayflydb/mayfly/internal/racebuild"
)

// pmodel is the model of TestModelPersistent: each document's rows per view,
// the sequence vector and the feed UUID.
type pmodel struct {
	docs map[string]map[string][]modelRow // id → view → rows
	seqs []uint64
	feed uint64
}

func (m *pmodel) clone() *pmodel {
	c := &pmodel{docs: maps.Clone(m.docs), seqs: slices.Clone(m.seqs), feed: m.feed}
	return c // the rows of a document are replaced, never changed
}

func (m *pmodel) sorted(view string) []modelRow {
	var all []modelRow
	for _, views := range m.docs {
		all = append(all, views[view]...)
	}
	slices.SortFunc(all, modelOrder)
	return all
}

var pmodelViews = []string{"v", "w", "m"}

// TestModelPersistent is TestModel for an index in a file (fsynced): random
// Applies of inserts, updates and deletions of documents with rows in three
// views (two with a count-and-sum reduce), random feed UUIDs, and random
// closes and reopens: plain ones, ones right after an Apply that may have
// started a background checkpoint, and ones while a background checkpoint
// is held just before its switch (with Applies and a Check meanwhile). The
// threshold of checkpoints is small and random, so they happen often. A copy
// of the file taken while a checkpoint is held (what a crash would leave) must
// open to the state of that moment. After every step, queries and reductions
// must match the model, and Check must pass. Rerun a failure with
// -index.seed=N.
func TestModelPersistent(t *testing.T) {
	racebuild.Skip(t)
	seed := *modelSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (rerun with -index.seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	dir := t.TempDir()
	cfg := index.Config{
		Path:          filepath.Join(dir, "model.view"),
		Signature:     "model",
		NumPartitions: 8,
		Views:         []index.ViewConfig{{Name: "v", Reducer: &countSum{}}, {Name: "w", Reducer: &countSum{}}, {Name: "m"}},
	}
	ctx := context.Background()
	m := &pmodel{docs: map[string]map[string][]modelRow{}, seqs: make([]uint64, cfg.NumPartitions)}
	ids := &model{}
	for i := range 80 {
		ids.ids = append(ids.ids, fmt.Sprintf("d%02d", i))
	}
	open := func(cfg index.Config) *index.Index {
		ix := openIndex(t, cfg)
		index.SetCheckpointDocs(ix, 1+rng.IntN(40))
		return ix
	}
	var seq uint64
	// batch returns random updates, and applies them to m.
	batch := func() []index.DocUpdate {
		var ups []index.DocUpdate
		for range 1 + rng.IntN(25) {
			id := ids.ids[rng.IntN(len(ids.ids))]
			seq++
			p := rng.IntN(cfg.NumPartitions)
			u := index.DocUpdate{DocID: id, Partition: uint16(p), Seq: seq - uint64(rng.IntN(3))}
			m.seqs[p] = max(m.seqs[p], u.Seq)
			if rng.IntN(5) == 0 {
				delete(m.docs, id)
				ups = append(ups, u)
				continue
			}
			u.Rows = map[string][]index.Emit{}
			views := map[string][]modelRow{}
			for vi, view := range pmodelViews {
				for ord := range rng.IntN(4 - vi) {
					k, v := randKey(rng, 0), rng.IntN(10)
					u.Rows[view] = append(u.Rows[view], index.Emit{Key: []byte(k), Value: []byte(strconv.Itoa(v))})
					views[view] = append(views[view], modelRow{key: k, id: id, ord: ord, value: v})
				}
			}
			m.docs[id] = views
			ups = append(ups, u)
		}
		return ups
	}
	applyBatch := func(ix *index.Index) {
		t.Helper()
		ups := batch()
		var upTo []uint64
		if rng.IntN(4) == 0 {
			upTo = make([]uint64, cfg.NumPartitions)
			for p := range upTo {
				upTo[p] = seq - uint64(rng.IntN(20))
				m.seqs[p] = max(m.seqs[p], upTo[p])
			}
		}
		if err := ix.ApplyUpTo(ctx, ups, upTo); err != nil {
			t.Fatalf("ApplyUpTo: %v", err)
		}
	}
	verify := func(ix *index.Index, m *pmodel, where string) {
		t.Helper()
		for _, view := range pmodelViews {
			sorted := m.sorted(view)
			if n, _ := ix.TotalRows(view); n != len(sorted) {
				t.Fatalf("%s: TotalRows(%s) %d, model %d", where, view, n, len(sorted))
			}
			var want []string
			for _, x := range sorted {
				want = append(want, x.String())
			}
			equalStrings(t, where+": all rows of "+view, rowsOf(t, ix, view, index.Range{}), want)
			compareQueries(t, ix, view, sorted, ids, rng, 4, where)
		}
		if got := ix.Seqs(); !slices.Equal(got, m.seqs) {
			t.Fatalf("%s: Seqs %v, model %v", where, got, m.seqs)
		}
		if got := ix.FeedUUID(); got != m.feed {
			t.Fatalf("%s: FeedUUID %d, model %d", where, got, m.feed)
		}
		checkIndex(t, ix)
	}

	ix := open(cfg)
	var reopens, runningAtClose, held, crashes int
	for step := range 150 {
		where := fmt.Sprintf("step %d", step)
		switch r := rng.IntN(20); {
		case r == 0: // a plain reopen
			closeIndex(t, ix)
			ix = open(cfg)
			reopens++
			where += " (reopened)"
		case r == 1: // close right after an Apply that likely started a checkpoint
			index.SetCheckpointDocs(ix, 1)
			applyBatch(ix)
			if index.CheckpointRunning(ix) {
				runningAtClose++
			}
			if err := ix.Close(); err != nil {
				t.Fatalf("%s: Close: %v", where, err)
			}
			ix = open(cfg)
			reopens++
			where += " (reopened after an Apply)"
		case r == 2: // hold a background checkpoint before its switch
			// Wait for a running checkpoint to end, then apply until one
			// starts (the threshold is also half the documents).
			for deadline := time.Now().Add(2 * time.Minute); index.CheckpointRunning(ix); time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("%s: a checkpoint runs for 2 minutes", where)
				}
			}
			paused, release := make(chan struct{}), make(chan struct{})
			released := false
			t.Cleanup(func() { // if the test fails while it is held
				if !released {
					close(release)
				}
			})
			index.SetCheckpointHook(ix, func() {
				close(paused)
				<-release
			})
			index.SetCheckpointDocs(ix, 1)
			for i := 0; !index.CheckpointRunning(ix); i++ {
				if i == 100 {
					t.Fatalf("%s: 100 Applies started no checkpoint", where)
				}
				applyBatch(ix)
			}
			<-paused
			index.SetCheckpointHook(ix, nil)
			held++
			// Applies and Check go on while the checkpoint is held.
			for range rng.IntN(3) {
				applyBatch(ix)
			}
			verify(ix, m, where+" (checkpoint held)")
			if rng.IntN(2) == 0 {
				// What a crash now would leave: the old checkpoint, the
				// whole log, and the new checkpoint's rows, unswitched.
				crash := filepath.Join(dir, fmt.Sprintf("crash%d.view", step))
				if err := index.CopyFile(ix, crash); err != nil {
					t.Fatal(err)
				}
				ccfg := cfg
				ccfg.Path = crash
				cix := open(ccfg)
				verify(cix, m, where+" (crash copy)")
				closeIndex(t, cix)
				crashes++
			}
			if rng.IntN(2) == 0 {
				// Close while it is held: Close waits for it.
				done := make(chan error, 1)
				go func() { done <- ix.Close() }()
				close(release)
				released = true
				if err := <-done; err != nil {
					t.Fatalf("%s: Close: %v", where, err)
				}
				ix = open(cfg)
				reopens++
				where += " (reopened after a held checkpoint)"
			} else {
				close(release)
				released = true
			}
		case r == 3:
			m.feed = rng.Uint64()
			if err := ix.SetFeedUUID(m.feed); err != nil {
				t.Fatal(err)
			}
		default:
			applyBatch(ix)
		}
		verify(ix, m, where)
	}
	t.Logf("%d reopens, %d with a checkpoint running at Close, %d checkpoints held, %d crash copies", reopens, runningAtClose, held, crashes)
}
