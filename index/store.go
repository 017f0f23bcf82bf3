package index

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// The bbolt file of an index holds a checkpoint of its rows and a log of the
// Applies made since:
//
//	meta           format, signature, views, seqs, checkpoint (see below)
//	rows/<c>/<view> checkpoint c ("a" or "b", as meta's checkpoint says): the
//	               view's rows in blocks of about blockSize bytes, keyed by the
//	               tree key of the block's first row; each row as in a
//	               document's back-index entry (see appendEntry)
//	log            one record per Apply since the checkpoint, keyed by a
//	               big-endian counter (see applier.update)
//
// Each Apply adds its log record and the sequence vector in one transaction.
// When the log holds as many documents as half the index (and at least
// checkpointDocs), Apply starts a checkpoint in the background: a goroutine
// writes the published snapshot (immutable: copy-on-write) into the other
// checkpoint's buckets in short transactions, while Applies go on adding log
// records; then one small transaction switches meta's checkpoint, drops the
// old one and deletes the log records the snapshot covers. A crash before
// that switch leaves the old checkpoint and the whole log, and the next Open
// drops the unfinished one. Open loads the checkpoint, rebuilding the back
// index from the rows' document ids, and replays the log.
var (
	bucketMeta = []byte("meta")
	bucketLog  = []byte("log")

	keyFormat    = []byte("format")     // formatVersion
	keySignature = []byte("signature")  // Config.Signature
	keyViews     = []byte("views")      // view names, each uvarint length and bytes
	keySeqs      = []byte("seqs")       // 8 bytes big-endian per partition
	keyCkpt      = []byte("checkpoint") // "a" or "b": which rows buckets hold the checkpoint
)

const (
	// formatVersion names the layout above; a file with another one is rebuilt.
	formatVersion = "mayfly-index-5"
	// blockSize is the size a checkpoint block grows to before a new one starts.
	blockSize = 32 << 10
	// checkpointDocs is the fewest logged documents that trigger a checkpoint.
	checkpointDocs = 1 << 16
	// blocksPerTx is how many checkpoint blocks one transaction writes, so
	// that Applies are held up for short moments only.
	blocksPerTx = 64
)

func rowsBucket(ckpt byte, view string) []byte {
	return append([]byte{'r', 'o', 'w', 's', '/', ckpt, '/'}, view...)
}

// otherCkpt names the checkpoint that is not c.
func otherCkpt(c byte) byte {
	if c == 'a' {
		return 'b'
	}
	return 'a'
}

// openBolt opens the index file; noSync is Config.NoSync.
func openBolt(path string, noSync bool) (*bolt.DB, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout:        5 * time.Second, // another process holds the file
		NoFreelistSync: true,            // bulk writes: rebuild the freelist at open instead
		FreelistType:   bolt.FreelistMapType,
		NoSync:         noSync,
	})
	if err != nil {
		return nil, fmt.Errorf("index: open %s: %w", path, err)
	}
	return db, nil
}

func encodeSeqs(seqs []uint64) []byte {
	b := make([]byte, 0, 8*len(seqs))
	for _, s := range seqs {
		b = binary.BigEndian.AppendUint64(b, s)
	}
	return b
}

func encodeViewNames(views []ViewConfig) []byte {
	var b []byte
	for _, v := range views {
		b = appendBytes(b, []byte(v.Name))
	}
	return b
}

// createBuckets makes the empty log and checkpoint "a" of a new file.
func createBuckets(tx *bolt.Tx, views []ViewConfig) error {
	names := [][]byte{bucketLog}
	for _, v := range views {
		names = append(names, rowsBucket('a', v.Name))
	}
	for _, name := range names {
		if _, err := tx.CreateBucket(name); err != nil {
			return err
		}
	}
	return nil
}

// dropCkpt deletes checkpoint c's rows buckets, if they exist.
func dropCkpt(tx *bolt.Tx, views []ViewConfig, c byte) error {
	for _, v := range views {
		if err := tx.DeleteBucket(rowsBucket(c, v.Name)); err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
			return err
		}
	}
	return nil
}

// prepareStore makes the file of db ready for cfg: a file written for another
// format, signature, list of views or number of partitions is emptied.
func prepareStore(db *bolt.DB, cfg *Config) error {
	paged := cfg.Cache != nil
	format := formatVersion
	if paged {
		format = pagedFormat
	}
	return db.Update(func(tx *bolt.Tx) error {
		if meta := tx.Bucket(bucketMeta); meta != nil &&
			string(meta.Get(keyFormat)) == format &&
			string(meta.Get(keySignature)) == cfg.Signature &&
			bytes.Equal(meta.Get(keyViews), encodeViewNames(cfg.Views)) &&
			len(meta.Get(keySeqs)) == 8*cfg.NumPartitions {
			if paged {
				return nil
			}
			if len(meta.Get(keyCkpt)) == 1 {
				// A checkpoint that was being written when the process stopped
				// is unfinished: drop it.
				return dropCkpt(tx, cfg.Views, otherCkpt(meta.Get(keyCkpt)[0]))
			}
		}
		var names [][]byte
		if err := tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
			names = append(names, name)
			return nil
		}); err != nil {
			return err
		}
		for _, name := range names {
			if err := tx.DeleteBucket(name); err != nil {
				return err
			}
		}
		meta, err := tx.CreateBucket(bucketMeta)
		if err != nil {
			return err
		}
		for _, kv := range [][2][]byte{
			{keyFormat, []byte(format)},
			{keySignature, []byte(cfg.Signature)},
			{keyViews, encodeViewNames(cfg.Views)},
			{keySeqs, encodeSeqs(make([]uint64, cfg.NumPartitions))},
		} {
			if err := meta.Put(kv[0], kv[1]); err != nil {
				return err
			}
		}
		if paged {
			return createPagedBuckets(tx, len(cfg.Views))
		}
		if err := createBuckets(tx, cfg.Views); err != nil {
			return err
		}
		return meta.Put(keyCkpt, []byte{'a'})
	})
}

// loadStore loads the checkpoint of ix.db into snap (whose trees must be empty)
// and ix.mu.back, then replays the log.
func (ix *Index) loadStore(ctx context.Context, snap *snapshot) error {
	return ix.db.View(func(tx *bolt.Tx) error {
		st, err := loadTx(ctx, tx, ix.views, snap, ix.mu.back)
		if err != nil {
			return err
		}
		ix.mu.ckpt, ix.mu.logDocs, ix.mu.logNext = st.ckpt, st.logDocs, st.logNext
		ix.feedUUID.Store(st.feedUUID)
		ix.mapped.Store(st.mapped)
		return nil
	})
}

// storeState is what loadTx reads from a file besides rows and sequence
// numbers.
type storeState struct {
	ckpt     byte   // current checkpoint, 'a' or 'b'
	logDocs  int    // documents in the log
	logNext  uint64 // key after the last log record (0: empty log)
	feedUUID uint64
	mapped   uint64 // see Index.Mapped
}

// loadTx loads the checkpoint of the file read by tx into snap (whose trees
// must be empty and whose seqs must have the file's length) and back, then
// replays the log. Open uses it, and so does Check to compare the file with
// memory. Everything it stores in snap and back is copied out of tx.
func loadTx(ctx context.Context, tx *bolt.Tx, views []ViewConfig, snap *snapshot, back map[string][]byte) (storeState, error) {
	var st storeState
	meta, log := tx.Bucket(bucketMeta), tx.Bucket(bucketLog)
	if meta == nil || log == nil {
		return st, fmt.Errorf("%w: missing bucket", ErrCorrupt)
	}
	seqs, ckpt := meta.Get(keySeqs), meta.Get(keyCkpt)
	if len(seqs) != 8*len(snap.seqs) || len(ckpt) != 1 || ckpt[0] != 'a' && ckpt[0] != 'b' {
		return st, fmt.Errorf("%w: bad meta", ErrCorrupt)
	}
	for i := range snap.seqs {
		snap.seqs[i] = binary.BigEndian.Uint64(seqs[8*i:])
	}
	st.ckpt = ckpt[0]
	st.feedUUID = loadFeedUUID(meta)
	st.mapped = loadMapped(meta)
	for vi, v := range views {
		rows := tx.Bucket(rowsBucket(st.ckpt, v.Name))
		if rows == nil {
			return st, fmt.Errorf("%w: missing rows of view %q", ErrCorrupt, v.Name)
		}
		var b builder
		c := rows.Cursor()
		for k, block := c.First(); k != nil; k, block = c.Next() {
			if err := ctx.Err(); err != nil {
				return st, err
			}
			if err := loadRowBlock(&b, back, vi, block); err != nil {
				return st, fmt.Errorf("%w: rows of view %q", err, v.Name)
			}
		}
		snap.roots[vi] = b.finish()
		snap.expRoots[vi] = buildExpiryTree(snap.roots[vi])
	}
	// Nothing is published yet: replay changes the loaded nodes (of
	// generation 0) in place. The first Apply starts generation 1.
	a := applier{w: wtx{gen: 0}, roots: snap.roots, expRoots: snap.expRoots, back: back}
	c := log.Cursor()
	for k, rec := c.First(); k != nil; k, rec = c.Next() {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		if len(k) != 8 {
			return st, fmt.Errorf("%w: log key %x", ErrCorrupt, k)
		}
		docs, err := a.replay(rec)
		if err != nil {
			return st, fmt.Errorf("%w: log record %x", err, k)
		}
		st.logDocs += docs
		st.logNext = binary.BigEndian.Uint64(k) + 1
	}
	return st, nil
}

// appendLog persists the log record of an Apply and the new sequence vector.
func (ix *Index) appendLog(rec []byte, seqs []uint64, mapped uint64) error {
	err := ix.db.Update(func(tx *bolt.Tx) error {
		log := tx.Bucket(bucketLog)
		log.FillPercent = 1 // keys only grow
		if err := log.Put(binary.BigEndian.AppendUint64(nil, ix.mu.logNext), rec); err != nil {
			return err
		}
		meta := tx.Bucket(bucketMeta)
		if err := meta.Put(keyMapped, binary.BigEndian.AppendUint64(nil, mapped)); err != nil {
			return err
		}
		return meta.Put(keySeqs, encodeSeqs(seqs))
	})
	if err != nil {
		return fmt.Errorf("index: write log: %w", err)
	}
	ix.mu.logNext++
	// bbolt rewrites the log's last leaf, record included, when the next
	// record joins it: the record will be read through the map.
	ix.mm.noteRead(len(rec))
	return nil
}

// checkpointLocked writes a checkpoint of snap, the published snapshot, at
// once, and empties the log (Close uses it).
// REQUIRES: ix.mu, no background checkpoint running.
func (ix *Index) checkpointLocked(snap *snapshot) error {
	if err := ix.writeCheckpoint(snap, ix.mu.ckpt, ix.mu.logNext, nil); err != nil {
		return err
	}
	ix.mu.ckpt = otherCkpt(ix.mu.ckpt)
	return nil
}

// startCheckpointLocked starts writing a checkpoint of snap, the snapshot
// just published, in the background.
// REQUIRES: ix.mu, no background checkpoint running.
func (ix *Index) startCheckpointLocked(snap *snapshot) {
	from, upTo, docs, hook := ix.mu.ckpt, ix.mu.logNext, ix.mu.logDocs, ix.ckptHook
	ix.mu.ckptRunning = true
	ix.mu.logDocs = 0
	ix.ckptDone.Add(1)
	go func() {
		defer ix.ckptDone.Done()
		err := ix.writeCheckpoint(snap, from, upTo, hook)
		ix.mu.Lock()
		defer ix.mu.Unlock()
		ix.mu.ckptRunning = false
		if err != nil {
			ix.mu.ckptErr = err
			ix.mu.logDocs += docs // still in the log: try again later
			return
		}
		ix.mu.ckpt = otherCkpt(from)
	}()
}

// writeCheckpoint writes snap into the checkpoint that is not from, in short
// transactions, then switches to it in one transaction that also drops the
// old checkpoint and the log records below upTo (the ones snap covers).
// beforeSwitch, if not nil, is called just before that switch (a test hook).
// It takes no lock: snap is immutable, and bbolt serializes its writers.
func (ix *Index) writeCheckpoint(snap *snapshot, from byte, upTo uint64, beforeSwitch func()) error {
	to := otherCkpt(from)
	err := ix.db.Update(func(tx *bolt.Tx) error {
		if err := dropCkpt(tx, ix.views, to); err != nil {
			return err
		}
		for _, v := range ix.views {
			if _, err := tx.CreateBucket(rowsBucket(to, v.Name)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	type kv struct{ k, v []byte }
	for vi, v := range ix.views {
		name := rowsBucket(to, v.Name)
		var pending []kv
		flushTx := func() error {
			if len(pending) == 0 {
				return nil
			}
			err := ix.db.Update(func(tx *bolt.Tx) error {
				rows := tx.Bucket(name)
				rows.FillPercent = 1 // written in key order
				for _, p := range pending {
					if err := rows.Put(p.k, p.v); err != nil {
						return err
					}
				}
				return nil
			})
			pending = pending[:0]
			return err
		}
		var block, first []byte
		n := 0
		err := walkLeaves(snap.roots[vi], func(leaf *node) error {
			for _, r := range leaf.rows() {
				if n == 0 {
					first = r.ck()
					block = make([]byte, 0, blockSize+len(r)+binary.MaxVarintLen32)
				}
				block = appendEntry(block, vi, r)
				if n++; len(block) >= blockSize {
					pending = append(pending, kv{first, block})
					n = 0
					if len(pending) == blocksPerTx {
						if err := flushTx(); err != nil {
							return err
						}
					}
				}
			}
			return nil
		})
		if err == nil && n > 0 {
			pending = append(pending, kv{first, block})
		}
		if err == nil {
			err = flushTx()
		}
		if err != nil {
			return err
		}
	}
	if beforeSwitch != nil {
		beforeSwitch()
	}
	err = ix.db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketMeta).Put(keyCkpt, []byte{to}); err != nil {
			return err
		}
		if err := dropCkpt(tx, ix.views, from); err != nil {
			return err
		}
		return truncateLog(tx, upTo, ix.mm)
	})
	ix.mm.release() // the transactions read the buckets they dropped
	return err
}

// truncateLog deletes, in tx, the log records below upTo.
// Each record's leaf page is read through the map (counted in mm).
func truncateLog(tx *bolt.Tx, upTo uint64, mm *mapRelease) error {
	c := tx.Bucket(bucketLog).Cursor()
	for k, _ := c.First(); k != nil && binary.BigEndian.Uint64(k) < upTo; k, _ = c.First() {
		mm.noteMappedIn(tx, k) // the record's leaf page
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}

// walkLeaves calls fn with each leaf under n, in key order.
func walkLeaves(n *node, fn func(*node) error) error {
	if n.leaf() {
		return fn(n)
	}
	for _, c := range n.children {
		if err := walkLeaves(c, fn); err != nil {
			return err
		}
	}
	return nil
}

// loadRowBlock adds the rows of a checkpoint block of view vi to b and to the
// back index, without copying them again: the rows share one copy of the
// block, and so does the back-index entry of a document with a single row.
func loadRowBlock(b *builder, back map[string][]byte, vi int, block []byte) error {
	d := decoder{b: bytes.Clone(block)}
	for !d.done() {
		entry := d.b
		v, r := int(d.uvarint()), row(d.bytes())
		if d.err != nil || v != vi || !validRow(r) {
			return ErrCorrupt
		}
		entry = entry[: len(entry)-len(d.b) : len(entry)-len(d.b)]
		b.add(r)
		_, _, rid := r.fields()
		id := strings.Clone(rid) // a key of its own: rid shares the block's bytes, which it would keep
		if prev, ok := back[id]; ok {
			back[id] = append(prev, entry...) // prev is capped (a block slice) or a copy made here
		} else {
			back[id] = entry
		}
	}
	return nil
}

// buildExpiryTree bulk-loads the expiry tree of the view whose tree is root
// (see snapshot.expRoots).
func buildExpiryTree(root *node) *node {
	var rows []row
	_ = walkLeaves(root, func(leaf *node) error {
		if leaf.minExp == 0 {
			return nil
		}
		for _, r := range leaf.rows() {
			if r.exp() != 0 {
				rows = append(rows, expiryRow(nil, r))
			}
		}
		return nil
	})
	slices.SortFunc(rows, func(a, b row) int { return bytes.Compare(a, b) })
	var b builder
	for _, r := range rows {
		b.add(r)
	}
	return b.finish()
}
