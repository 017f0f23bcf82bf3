package engine

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// A crash of a pebble store, simulated by pebble's memory file system,
// which keeps what was synced and a random part of what was not: a store
// that syncs keeps every commit it acknowledged; one that does not
// (NoSync) may lose its newest commits, but each commit survives whole or
// not at all, in order, with its sequence numbers and CAS. The commits
// touch many partitions each, the sequence log checkpoints every few
// commits, and each seed crashes after a different commit, so that crashes
// land before, on and after checkpoints.
func TestPebbleCrashKeepsWholeCommits(t *testing.T) {
	const commits, per, parts = 30, 20, 50
	for _, noSync := range []bool{false, true} {
		t.Run(fmt.Sprintf("NoSync=%v", noSync), func(t *testing.T) {
			for seed := uint64(1); seed <= 20; seed++ {
				mem := vfs.NewCrashableMem()
				o := &Options{NoSync: noSync, Logger: slog.New(slog.DiscardHandler)}
				st, err := openPebbleStorageOn(mem, "/db", o)
				if err != nil {
					t.Fatal(err)
				}
				st.mu.seq.every = 4
				// want[c] is every partition's high seqno after the first c commits.
				want := make([]map[uint16]uint64, commits+1)
				want[0] = map[uint16]uint64{}
				crashAt := int(seed*7) % (commits + 1) // commits acknowledged before the crash
				var crashed *vfs.MemFS
				for c := range commits {
					if c == crashAt {
						crashed = mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 50, RNG: rand.New(rand.NewPCG(seed, 7))})
					}
					want[c+1] = maps.Clone(want[c])
					recs := make([]record, per)
					for i := range recs {
						n := uint64(c*per + i + 1)
						p := uint16((c*7 + i) % parts)
						recs[i] = put(testDoc(0, fmt.Sprintf("c%02d-%02d", c, i), p, n, n, 0, `{}`), 0)
						want[c+1][p] = n
					}
					if err := st.commit(recs); err != nil {
						t.Fatal(err)
					}
				}
				if crashed == nil {
					crashed = mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 50, RNG: rand.New(rand.NewPCG(seed, 7))})
				}
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
					if (c < kept && perCommit[c] != per) || (c >= kept && perCommit[c] != 0) || kept > crashAt {
						t.Fatalf("seed %d: documents kept per commit %v: not whole commits in order", seed, perCommit)
					}
				}
				if !noSync && kept != crashAt {
					t.Fatalf("seed %d: a syncing store kept %d of %d acknowledged commits", seed, kept, crashAt)
				}
				if !maps.Equal(got.seqs, want[kept]) || got.meta.cas != uint64(kept*per) {
					t.Errorf("seed %d: %d commits kept, seqnos %v and cas %d, want %v and %d", seed, kept, got.seqs, got.meta.cas, want[kept], kept*per)
				}
				// The log goes on from what the crash kept.
				n := uint64(kept*per + 1)
				mustCommit(t, st, put(testDoc(0, "after", 3, n, n, 0, `{}`), 0))
				if err := st.close(false); err != nil {
					t.Fatal(err)
				}
				st, err = openPebbleStorageOn(crashed, "/db", o)
				if err != nil {
					t.Fatal(err)
				}
				want[kept][3] = n
				if seqs, err := st.seqnos(); err != nil || !maps.Equal(seqs, want[kept]) {
					t.Errorf("seed %d: after a commit and a reopen, seqnos %v (%v), want %v", seed, seqs, err, want[kept])
				}
				if err := st.close(false); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// walCrashFS is a crashable memory file system that, once armed, takes its
// crash clone right after the next write to a write-ahead log: the clone
// holds the commits synced before and a random part (4 KiB blocks) of the
// one being written, a crash in the middle of a commit.
type walCrashFS struct {
	*vfs.MemFS
	cfg     vfs.CrashCloneCfg
	mu      sync.Mutex
	armed   bool
	crashed *vfs.MemFS
}

type walCrashFile struct {
	vfs.File
	fs *walCrashFS
}

func (f walCrashFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.fs.armed {
		f.fs.armed = false
		f.fs.crashed = f.fs.MemFS.CrashClone(f.fs.cfg)
	}
	return n, err
}

func (fs *walCrashFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil || !strings.HasSuffix(name, ".log") {
		return f, err
	}
	return walCrashFile{File: f, fs: fs}, nil
}

func (fs *walCrashFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.MemFS.Create(name, c)
	return fs.wrap(name, f, err)
}

func (fs *walCrashFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.MemFS.ReuseForWrite(oldname, newname, c)
	return fs.wrap(newname, f, err)
}

// A crash in the middle of a commit (its write-ahead log record partly
// written, torn at 4 KiB blocks): the store reopens with every commit
// before it whole and that one whole or not at all, never a part of its
// documents, and with the sequence numbers and CAS of exactly the commits
// it kept, across the sequence log's checkpoints.
func TestPebbleCrashMidCommit(t *testing.T) {
	const commits, per, parts = 12, 20, 40
	value := `{"pad":"` + strings.Repeat("x", 600) + `"}` // a commit spans several blocks
	for seed := uint64(1); seed <= 24; seed++ {
		fs := &walCrashFS{MemFS: vfs.NewCrashableMem(), cfg: vfs.CrashCloneCfg{UnsyncedDataPercent: 50, RNG: rand.New(rand.NewPCG(seed, 11))}}
		o := &Options{Logger: slog.New(slog.DiscardHandler)}
		st, err := openPebbleStorageOn(fs, "/db", o)
		if err != nil {
			t.Fatal(err)
		}
		st.mu.seq.every = 3
		crashAt := int(seed) % commits // the commit the crash cuts
		want := make([]map[uint16]uint64, commits+1)
		want[0] = map[uint16]uint64{}
		for c := range commits {
			if c == crashAt {
				fs.mu.Lock()
				fs.armed = true
				fs.mu.Unlock()
			}
			want[c+1] = maps.Clone(want[c])
			recs := make([]record, per)
			for i := range recs {
				n := uint64(c*per + i + 1)
				p := uint16((c*11 + i) % parts)
				recs[i] = put(testDoc(0, fmt.Sprintf("c%02d-%02d", c, i), p, n, n, 0, value), 0)
				want[c+1][p] = n
			}
			mustCommit(t, st, recs...)
		}
		if err := st.close(false); err != nil {
			t.Fatal(err)
		}
		fs.mu.Lock()
		crashed := fs.crashed
		fs.mu.Unlock()
		if crashed == nil {
			t.Fatalf("seed %d: no write-ahead log write after commit %d", seed, crashAt)
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
		if kept != crashAt && kept != crashAt+1 {
			t.Fatalf("seed %d: crash in commit %d kept %d commits", seed, crashAt, kept)
		}
		if !maps.Equal(got.seqs, want[kept]) || got.meta.cas != uint64(kept*per) {
			t.Errorf("seed %d: %d commits kept, seqnos %v and cas %d, want %v and %d", seed, kept, got.seqs, got.meta.cas, want[kept], kept*per)
		}
		if err := st.close(false); err != nil {
			t.Fatal(err)
		}
	}
}

// seqKeys returns the keys of the store's sequence numbers: the old
// format's per-partition 'v' keys and the sequence log's 'w' records.
func seqKeys(t *testing.T, st *pebbleStorage) (old, log int) {
	t.Helper()
	it, err := st.db.NewIter(&pebble.IterOptions{LowerBound: []byte{'v'}, UpperBound: []byte{'x'}})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		if it.Key()[0] == 'v' {
			old++
		} else {
			log++
		}
	}
	return old, log
}

// A commit that touches many partitions writes one sequence record, not a
// key per partition; checkpoints keep the log short, and every partition's
// number, those only an early commit set included, survives a reopen.
func TestPebbleSequenceLog(t *testing.T) {
	o := &Options{NoSync: true, Logger: slog.New(slog.DiscardHandler)}
	mem := vfs.NewMem()
	st, err := openPebbleStorageOn(mem, "/db", o)
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint16]uint64{}
	var seq uint64
	commit := func(parts ...uint16) {
		t.Helper()
		var recs []record
		for _, p := range parts {
			seq++
			recs = append(recs, put(testDoc(0, fmt.Sprintf("k%d", p), p, seq, seq, 0, `{}`), 0))
			want[p] = seq
		}
		mustCommit(t, st, recs...)
	}
	many := make([]uint16, 77)
	for i := range many {
		many[i] = uint16(i * 13)
	}
	commit(many...)
	if old, log := seqKeys(t, st); old != 0 || log != 1 {
		t.Fatalf("a commit over %d partitions left %d partition keys and %d log records, want 0 and 1", len(many), old, log)
	}
	// A purge sets no sequence number, and writes no record.
	mustCommit(t, st, record{key: docKey{key: "k0"}, part: 0, seq: 1, purge: true})
	if _, log := seqKeys(t, st); log != 1 {
		t.Fatalf("a purge wrote a sequence record (%d records)", log)
	}
	for i := range 3 * seqCheckpointEvery {
		commit(uint16(i%5), 2000)
		if _, log := seqKeys(t, st); log > seqCheckpointEvery+1 {
			t.Fatalf("after %d commits the log holds %d records: no checkpoint", i+2, log)
		}
	}
	if got, err := st.seqnos(); err != nil || !maps.Equal(got, want) {
		t.Fatalf("seqnos %v (%v), want %v", got, err, want)
	}
	if err := st.close(true); err != nil {
		t.Fatal(err)
	}
	if st, err = openPebbleStorageOn(mem, "/db", o); err != nil {
		t.Fatal(err)
	}
	defer st.close(false)
	if got, err := st.seqnos(); err != nil || !maps.Equal(got, want) {
		t.Fatalf("after a reopen, seqnos %v (%v), want %v", got, err, want)
	}
}

// A store written before the sequence log (testdata/pebble-seqkeys: written
// by the store at 4d30961, a 'v' key per partition) opens with its
// documents and sequence numbers, rewrites them as the log's first record,
// and goes on from them.
func TestPebbleOpensOldSequenceKeys(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pebble")
	if err := os.CopyFS(dir, os.DirFS("testdata/pebble-seqkeys")); err != nil {
		t.Fatal(err)
	}
	o := &Options{Logger: slog.New(slog.DiscardHandler)}
	st, err := openPebbleStorageOn(vfs.Default, dir, o)
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint16]uint64{0: 2, 1: 1, 5: 7, 1023: 9}
	got := readAll(t, st)
	if !maps.Equal(got.seqs, want) || got.meta.cas != 5 || len(got.docs) != 4 || !got.meta.clean {
		t.Fatalf("old store: seqnos %v, cas %d, %d documents, clean %v; want %v, 5, 4, true", got.seqs, got.meta.cas, len(got.docs), got.meta.clean, want)
	}
	if old, log := seqKeys(t, st); old != 0 || log != 1 {
		t.Fatalf("after the open, %d partition keys and %d log records, want 0 and 1", old, log)
	}
	mustCommit(t, st, put(testDoc(0, "e", 5, 8, 6, 0, `{}`), 0))
	want[5] = 8
	if err := st.close(false); err != nil {
		t.Fatal(err)
	}
	if st, err = openPebbleStorageOn(vfs.Default, dir, o); err != nil {
		t.Fatal(err)
	}
	defer st.close(false)
	if got, err := st.seqnos(); err != nil || !maps.Equal(got, want) {
		t.Fatalf("after a commit and a reopen, seqnos %v (%v), want %v", got, err, want)
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

// BenchmarkPebbleCommitSpread measures a group commit as the memcached
// port's sets at durability none make them (BENCHMARKS.md, "The engine's
// write path at none"): 80 writes of 100 bytes to 1,000 keys over 1,024
// partitions, nearly a partition a write, without fsync, the records made
// and encoded beforehand (as writers do before the flusher commits). Its
// figure is the commit's cost, a write's share being an eightieth.
func BenchmarkPebbleCommitSpread(b *testing.B) {
	const keys, parts, per, batches = 1000, 1024, 80, 64
	st, err := openPebbleStorage(b.TempDir(), &Options{NoSync: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer st.close(false)
	value := `{"v":"` + string(make([]byte, 90)) + `"}`
	all := make([][]record, batches)
	for i := range all {
		all[i] = make([]record, per)
		for j := range all[i] {
			n := i*per + j
			k := n * 7919 % keys
			r := put(testDoc(0, fmt.Sprintf("key:%d", k), uint16(k%parts), uint64(n/keys+1), uint64(n+1), 0, value), 0)
			r.enc = st.encode(r)
			all[i][j] = r
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if err := st.commit(all[i%batches]); err != nil {
			b.Fatal(err)
		}
	}
}

// A store's tables carry bloom filters: once its documents are in tables, a
// get of a key it does not have is answered by the filter without reading
// a data block (a fullEviction miss, and a get's look into the levels above
// its key's), and the keys it has are still found, value for value.
func TestPebbleFiltersAnswerAbsentKeys(t *testing.T) {
	o := &Options{NoSync: true, Logger: slog.New(slog.DiscardHandler)}
	st, err := openPebbleStorageOn(vfs.NewMem(), "/db", o)
	if err != nil {
		t.Fatal(err)
	}
	defer st.close(false)
	const n = 2000
	var recs []record
	for i := range n {
		recs = append(recs, put(testDoc(0, fmt.Sprintf("doc%05d", i), uint16(i%64), uint64(i+1), uint64(i+1), 0, fmt.Sprintf(`{"n":%d}`, i)), 0))
	}
	mustCommit(t, st, recs...)
	if err := st.db.Flush(); err != nil {
		t.Fatal(err)
	}
	before := st.db.Metrics().Filter
	for i := range n {
		k := docKey{key: fmt.Sprintf("doc%05dx", i)} // between two keys it has
		if d, err := st.doc(k); !errors.Is(err, ErrNotFound) || d != nil {
			t.Fatalf("absent key %q: %v, %v", k.key, d, err)
		}
	}
	after := st.db.Metrics().Filter
	if hits := after.Hits - before.Hits; hits < n*9/10 {
		t.Errorf("%d gets of absent keys: the filters answered %d (misses %d), want at least %d", n, hits, after.Misses-before.Misses, n*9/10)
	}
	for i := range n {
		k := docKey{key: fmt.Sprintf("doc%05d", i)}
		d, err := st.doc(k)
		if err != nil || d == nil || string(d.Value) != fmt.Sprintf(`{"n":%d}`, i) {
			t.Fatalf("key %q: %v, %v", k.key, d, err)
		}
	}
}

// TestPebbleMemTableFor: a small bucket's memtables are a 128th of its
// quota (at least 512 KiB), so the default 100 MiB bucket's two resident
// ones stay under 2 MB; from 256 MiB on, a 64th as before, at most 16 MiB.
func TestPebbleMemTableFor(t *testing.T) {
	for _, c := range []struct{ quota, want int64 }{
		{16 << 20, 512 << 10},
		{100 << 20, 800 << 10},
		{255 << 20, 255 << 20 / 128},
		{256 << 20, 4 << 20},
		{1 << 30, 16 << 20},
		{8 << 30, 16 << 20},
	} {
		if got := pebbleMemTableFor(c.quota); got != c.want {
			t.Errorf("pebbleMemTableFor(%d MiB) = %d, want %d", c.quota>>20, got, c.want)
		}
	}
	if z := pebbleSizesFor(100 << 20); z.memTable != 800<<10 || z.cache != 8<<20 {
		t.Errorf("pebbleSizesFor(100 MiB) = %+v", z)
	}
}

// A pebble store encodes each commit's documents into one buffer it keeps
// and reuses one batch from commit to commit: every document reads back
// with its own value and metadata, after each commit and after a reopen,
// whatever the sizes around it (values larger than the kept buffer, a
// commit larger than the batch keeps, one after a small one).
func TestPebbleReusedBatchKeepsEachDocument(t *testing.T) {
	o := &Options{NoSync: true, Logger: slog.New(slog.DiscardHandler)}
	mem := vfs.NewMem()
	st, err := openPebbleStorageOn(mem, "/db", o)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	want := map[string]*Document{}
	var seq uint64
	sizes := []int{10, 100, scratchMax + 1, 3, batchKeptMax / 100, 0, 2 * scratchMax}
	for c := range 40 {
		n := 1 + rng.IntN(20)
		if c%7 == 3 {
			n = 2 * batchKeptMax / 100 // a commit whose batch outgrows what is kept
		}
		var recs []record
		for range n {
			seq++
			key := fmt.Sprintf("k%d", rng.IntN(50))
			size := sizes[rng.IntN(len(sizes))]
			if c%7 == 3 {
				size = 100
			}
			val := strings.Repeat(string(rune('a'+seq%26)), size)
			d := testDoc(0, key, uint16(seq%8), seq, seq, 0, val)
			d.Type, d.Flags = TypeBinary, uint32(seq)
			recs = append(recs, put(d, 0))
			want[key] = d
		}
		mustCommit(t, st, recs...)
		check := func(when string) {
			t.Helper()
			for key, w := range want {
				got, err := st.doc(docKey{key: key})
				if err != nil {
					t.Fatalf("%s, commit %d: %q: %v", when, c, key, err)
				}
				if string(got.Value) != string(w.Value) || got.Seq != w.Seq || got.CAS != w.CAS || got.Flags != w.Flags {
					t.Fatalf("%s, commit %d: %q holds seq %d cas %d flags %d and %d bytes, want seq %d cas %d flags %d and %d bytes",
						when, c, key, got.Seq, got.CAS, got.Flags, len(got.Value), w.Seq, w.CAS, w.Flags, len(w.Value))
				}
			}
		}
		check("after the commit")
		if c == 39 {
			if err := st.close(true); err != nil {
				t.Fatal(err)
			}
			if st, err = openPebbleStorageOn(mem, "/db", o); err != nil {
				t.Fatal(err)
			}
			defer st.close(false)
			check("after a reopen")
		}
	}
}

// docRecordLen is the length appendDocRecord writes, for the values a
// record's varints take at their bounds (zero, one byte's, the largest,
// negative times).
func TestDocRecordLen(t *testing.T) {
	for _, d := range []*Document{
		{},
		{Value: []byte("v"), CAS: 1<<63 + 5, RevSeq: 127, Seq: 128, Partition: 1023, Flags: 1<<32 - 1,
			Expiration: -1, TS: 1 << 62, CreatedAt: -1 << 63},
		{Deleted: true, DeletedAt: 1_800_000_000, CAS: 1_700_000_000_000_000_000, Seq: 1 << 40},
		testDoc(3, "key:17", 17, 99, 12345, 2_000_000_000, strings.Repeat("x", 300)),
	} {
		if got, want := docRecordLen(d), len(appendDocRecord(nil, d)); got != want {
			t.Errorf("docRecordLen(%+v) = %d, the record is %d bytes", d, got, want)
		}
	}
}

// A commit's pebble batch is sized before its first record (batchBytes),
// so that it never grows by doubling: the bound holds for writes, purges,
// expiry entries that change and a sequence-log checkpoint, and the kept
// buffer serves the next commit of the same size.
func TestPebbleBatchBytesBoundsTheBatch(t *testing.T) {
	st, err := openPebbleStorageOn(vfs.NewMem(), "/db", &Options{NoSync: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.close(false)
	st.mu.seq.every = 3 // a checkpoint every third commit
	seq := uint64(0)
	for round := range 7 {
		var recs []record
		for i := range 50 + 40*round {
			seq++
			k := fmt.Sprintf("key:%d", (i*7919)%500)
			switch i % 5 {
			case 0, 2: // an expiry entry replaced
				recs = append(recs, put(testDoc(0, k, uint16(i%1024), seq, seq, 2_000_000_000+int64(i), `{"v":1}`), 1_900_000_000))
			case 1: // a purge
				recs = append(recs, record{purge: true, key: docKey{key: k}, part: uint16(i % 1024), seq: seq})
			default:
				recs = append(recs, put(testDoc(0, k, uint16(i%1024), seq, seq, 0, strings.Repeat("v", 100+i)), 0))
			}
		}
		st.mu.Lock()
		need := st.batchBytes(recs, st.supersededLocked(recs))
		st.mu.Unlock()
		mustCommit(t, st, recs...)
		st.mu.Lock()
		used, kept := st.mu.batchLen, st.mu.batchCap
		st.mu.Unlock()
		if used > need || need > used+used/5 {
			t.Fatalf("round %d: the batch took %d bytes, batchBytes said %d (at most, and within a fifth)", round, used, need)
		}
		if kept < used {
			t.Fatalf("round %d: the kept buffer holds %d bytes, the batch took %d", round, kept, used)
		}
	}
}

// A commit that writes one key many times puts the key's last version
// alone in its pebble batch (supersededLocked): a backlog of a hot key
// costs the write-ahead log and the memtable one version, and the store
// holds that version.
func TestPebbleCommitLeavesOutSupersededVersions(t *testing.T) {
	st, err := openPebbleStorageOn(vfs.NewMem(), "/db", &Options{NoSync: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.close(false)
	value := strings.Repeat("v", 1000)
	var recs []record
	for seq := uint64(1); seq <= 50; seq++ {
		recs = append(recs, put(testDoc(0, "hot", 7, seq, seq, 0, value), 0))
	}
	mustCommit(t, st, recs...)
	st.mu.Lock()
	used := st.mu.batchLen
	st.mu.Unlock()
	if used > 2*len(value) {
		t.Errorf("a commit of 50 versions of one 1,000-byte document took a batch of %d bytes, want one version's", used)
	}
	d, err := st.doc(docKey{key: "hot"})
	if err != nil || d.Seq != 50 {
		t.Fatalf("stored %+v (%v), want the 50th version", d, err)
	}
}

// BenchmarkSuperseded measures supersededLocked's look for repeated keys in
// a commit of the memcached benchmark's sets (1,000 keys over 1,024
// partitions): 500 records without a repeat, and 3,000 records, two thirds
// of them superseded. Its figure is a record's share.
func BenchmarkSuperseded(b *testing.B) {
	st, err := openPebbleStorageOn(vfs.NewMem(), "/db", &Options{NoSync: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer st.close(false)
	for _, n := range []int{500, 3000} {
		recs := make([]record, n)
		for i := range recs {
			k := fmt.Sprintf("key:%d", (i*7919)%1000)
			recs[i] = record{key: docKey{key: k}, part: partitionOf(k, 1024)}
		}
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			st.mu.Lock()
			defer st.mu.Unlock()
			for b.Loop() {
				st.supersededLocked(recs)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/record")
		})
	}
}
