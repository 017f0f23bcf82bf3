package engine

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// A crash of a pebble store, simulated by pebble's memory file system,
// which keeps what was synced and a random part of what was not: a store
// that syncs keeps every commit it acknowledged; one that does not
// (NoSync) may lose its newest commits, but each commit survives whole or
// not at all, in order, with its sequence numbers and CAS.
func TestPebbleCrashKeepsWholeCommits(t *testing.T) {
	const commits, per = 30, 20
	for _, noSync := range []bool{false, true} {
		t.Run(fmt.Sprintf("NoSync=%v", noSync), func(t *testing.T) {
			for seed := uint64(1); seed <= 10; seed++ {
				mem := vfs.NewCrashableMem()
				o := &Options{NoSync: noSync, Logger: slog.New(slog.DiscardHandler)}
				st, err := openPebbleStorageOn(mem, "/db", o)
				if err != nil {
					t.Fatal(err)
				}
				for c := range commits {
					recs := make([]record, per)
					for i := range recs {
						n := uint64(c*per + i + 1)
						recs[i] = put(testDoc(0, fmt.Sprintf("c%02d-%02d", c, i), 0, n, n, 0, `{}`), 0)
					}
					if err := st.commit(recs); err != nil {
						t.Fatal(err)
					}
				}
				crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 50, RNG: rand.New(rand.NewPCG(seed, 7))})
				if err := st.close(false); err != nil {
					t.Fatal(err)
				}
				st, err = openPebbleStorageOn(crashed, "/db", o)
				if err != nil {
					t.Fatalf("seed %d: reopen after a crash: %v", seed, err)
				}
				got := readAll(t, st)
				perCommit := make([]int, commits)
				for _, d := range got.docs {
					var c, i int
					if _, err := fmt.Sscanf(d.Key, "c%02d-%02d", &c, &i); err != nil {
						t.Fatalf("stored key %q", d.Key)
					}
					perCommit[c]++
				}
				kept := 0
				for kept < commits && perCommit[kept] == per {
					kept++
				}
				for c := range commits {
					if (c < kept && perCommit[c] != per) || (c >= kept && perCommit[c] != 0) {
						t.Fatalf("seed %d: documents kept per commit %v: not whole commits in order", seed, perCommit)
					}
				}
				if !noSync && kept != commits {
					t.Fatalf("seed %d: a syncing store kept %d of %d acknowledged commits", seed, kept, commits)
				}
				if want := uint64(kept * per); got.seqs[0] != want || got.meta.cas != want {
					t.Errorf("seed %d: %d commits kept, seqno %d and cas %d, want %d", seed, kept, got.seqs[0], got.meta.cas, want)
				}
				if err := st.close(false); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// openPebbleStorage opens the store in dir at the largest sizes, as the
// tests and benchmarks of the store itself do.
func openPebbleStorage(dir string, o *Options) (*pebbleStorage, error) {
	return openPebbleStorageOn(nil, dir, o)
}

// openPebbleStorageOn is openPebbleStorage on the file system fs.
func openPebbleStorageOn(fs vfs.FS, dir string, o *Options) (*pebbleStorage, error) {
	return openPebbleStorageSized(fs, dir, o, pebbleSizesFor(0))
}
