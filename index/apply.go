package index

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
)

// Apply replaces the rows of each updated document in every view with its new
// rows, found through the back index, and raises the sequence number of each
// update's partition to its Seq (it never lowers one). Updates apply in order,
// so a document updated twice keeps its last rows. With a Path, all of it is
// persisted (logged) in one bbolt transaction before queries see any of it;
// if Apply fails, nothing of it is applied, except after an error wrapping
// ErrCheckpoint, which comes after the updates were applied and persisted (a
// checkpoint, or a paged index's write-back, failed). Applying the same
// updates again is harmless.
//
// An emitted key that is not valid JSON fails the whole Apply with an error
// wrapping ErrInvalidKey; values are stored as given, nil as null.
func (ix *Index) Apply(ctx context.Context, updates []DocUpdate) error {
	return ix.ApplyUpTo(ctx, updates, nil)
}

// ApplyUpTo is Apply that also raises each partition p's sequence number to
// upTo[p] (when upTo is not nil), in the same transaction. A change-feed
// consumer passes the vector it has read up to, so that partitions whose
// changes produced no update (documents of other collections, superseded
// feed entries) advance too.
func (ix *Index) ApplyUpTo(ctx context.Context, updates []DocUpdate, upTo []uint64) (err error) {
	return ix.ApplyDurable(ctx, updates, upTo, nil)
}

// ApplyDurable is ApplyUpTo that calls durable (if not nil) once what it
// applied is in the file (every persisted index, paged or not, logs each
// Apply before it returns), or at once for an index not persisted; it is
// called with no lock of the index held, before ApplyDurable returns. A
// change-feed consumer acknowledges its position there.
func (ix *Index) ApplyDurable(ctx context.Context, updates []DocUpdate, upTo []uint64, durable func()) (err error) {
	return ix.applyDurable(ctx, updates, upTo, nil, durable)
}

// Rewind removes every row of the documents whose partition (partOf of
// their id) is one of parts, and sets those partitions' sequence numbers
// to 0, in one transaction, as an Apply of their deletions: a change-feed
// consumer whose bucket no longer holds what it saw of those partitions
// (a partition's copy dropped) then reads them again from their start.
// The other partitions' rows and sequence numbers stay. durable is called
// as ApplyDurable calls it.
func (ix *Index) Rewind(ctx context.Context, parts []int, partOf func(docID string) int, durable func()) error {
	nparts := len(ix.snap.Load().seqs)
	for _, p := range parts {
		if p < 0 || p >= nparts {
			return fmt.Errorf("%w: partition %d of %d", ErrPartition, p, nparts)
		}
	}
	return ix.applyDurable(ctx, nil, nil, &rewind{parts: parts, partOf: partOf}, durable)
}

// rewind is what Rewind removes: the documents of parts, by partOf.
type rewind struct {
	parts  []int
	partOf func(docID string) int
}

// applyDurable is ApplyDurable, which first, when rw is not nil, adds to
// updates the deletions of rw's documents, found under the writer's lock,
// and lowers rw's partitions' sequence numbers to 0 last.
func (ix *Index) applyDurable(ctx context.Context, updates []DocUpdate, upTo []uint64, rw *rewind, durable func()) (err error) {
	if err := ctx.Err(); err != nil {
		return err
	}
	nparts := len(ix.snap.Load().seqs)
	if upTo != nil && len(upTo) != nparts {
		return fmt.Errorf("%w: sequence vector of %d partitions, the index has %d", ErrPartition, len(upTo), nparts)
	}
	for i := range updates {
		u := &updates[i]
		if int(u.Partition) >= nparts {
			return fmt.Errorf("%w: document %q partition %d", ErrPartition, u.DocID, u.Partition)
		}
		for name := range u.Rows {
			if _, ok := ix.byName[name]; !ok {
				return fmt.Errorf("%w: %q (document %q)", ErrUnknownView, name, u.DocID)
			}
		}
	}
	var done []func() // durable callbacks to call once unlocked
	defer runDone(&done)
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.closed.Load() {
		return ErrClosed
	}
	if rw != nil {
		if updates, err = ix.rewindUpdatesLocked(updates, rw); err != nil {
			return err
		}
	}
	old := ix.snap.Load()
	ix.mu.gen++
	snap := &snapshot{roots: slices.Clone(old.roots), expRoots: slices.Clone(old.expRoots), seqs: slices.Clone(old.seqs), gen: ix.mu.gen}
	a := applier{
		w:        wtx{gen: ix.mu.gen},
		roots:    snap.roots,
		expRoots: snap.expRoots,
		back:     ix.mu.back,
		undo:     make([]undo, 0, len(updates)),
	}
	if ix.ps != nil {
		// The documents' back-index entries, from the file: the map is
		// this Apply's, dropped if it fails.
		if a.back, err = ix.ps.readBack(updates); err != nil {
			return err
		}
		a.undo = nil
		a.w.leafRows = ix.leafRows
	}
	if ix.db != nil {
		a.log = make([]byte, 0, 64*len(updates))
	}
	mapped := ix.mapped.Load()
	for i := range updates {
		if updates[i].Rows != nil {
			mapped++
		}
	}
	err = func() (err error) {
		defer recoverPage(&err)
		for i := range updates {
			if i&1023 == 1023 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			u := &updates[i]
			if err := a.update(ix.views, u); err != nil {
				return err
			}
			if p := u.Partition; u.Seq > snap.seqs[p] {
				snap.seqs[p] = u.Seq
			}
		}
		for p, seq := range upTo {
			snap.seqs[p] = max(snap.seqs[p], seq)
		}
		if rw != nil {
			for _, p := range rw.parts {
				snap.seqs[p] = 0
			}
		}
		if ix.db != nil {
			return ix.appendLog(a.log, snap.seqs, mapped)
		}
		return nil
	}()
	if err != nil {
		a.rollback()
		return err
	}
	ix.publish(snap)
	ix.mapped.Store(mapped)
	if durable != nil { // in the log (or in memory only) already
		done = append(done, durable)
	}
	if ix.ps != nil {
		ix.ps.applied(snap.gen, &a, updates)
		ix.mu.logDocs += len(updates)
		if !ix.writeBackDue(snap) {
			ix.mm.maybe() // of readBack's reads
			return nil
		}
		if werr := ix.writeBackLocked(); werr != nil {
			return fmt.Errorf("%w: %w", ErrCheckpoint, werr)
		}
		return nil
	}
	if ix.db != nil {
		ix.mu.logDocs += len(updates)
		if err := ix.mu.ckptErr; err != nil {
			ix.mu.ckptErr = nil
			return fmt.Errorf("%w: %w", ErrCheckpoint, err)
		}
		if !ix.mu.ckptRunning && ix.mu.logDocs >= max(ix.checkpointDocs, len(ix.mu.back)/2) {
			ix.startCheckpointLocked(snap)
		}
		ix.mm.maybe() // of the log's records (see appendLog)
	}
	return nil
}

// applier applies document updates to the trees of one writer generation and
// to the back index, and builds the log record that persists them.
type applier struct {
	w        wtx
	roots    []*node
	expRoots []*node           // see snapshot.expRoots
	back     map[string][]byte // changed in place; undo restores it
	undo     []undo            // nil: no undo (replay at Open)
	log      []byte            // log record being built; nil: not persisted
	enc      []byte            // scratch
	row      []byte            // scratch
	rows     []byte            // scratch: the rows of one document (see replace)
}

// undo is the back-index entry of a document before an Apply changed it.
type undo struct {
	id   string
	rows []byte
	had  bool
}

// rollback restores the back index after a failed Apply. The trees need
// nothing: the failed Apply's nodes were never published.
func (a *applier) rollback() {
	for _, u := range slices.Backward(a.undo) {
		if u.had {
			a.back[u.id] = u.rows
		} else {
			delete(a.back, u.id)
		}
	}
}

// update applies one DocUpdate, appending its log entry: uvarint length and
// document id, then uvarint length and the document's rows (see replace).
func (a *applier) update(views []ViewConfig, u *DocUpdate) error {
	a.rows = a.rows[:0]
	for vi, v := range views {
		for ord, e := range u.Rows[v.Name] {
			var err error
			if a.enc, err = appendKey(a.enc[:0], e.Key); err != nil {
				return fmt.Errorf("document %q view %q: %w", u.DocID, v.Name, err)
			}
			value := e.Value
			if value == nil {
				value = jsonNull
			}
			a.row = appendRow(a.row[:0], a.enc, u.DocID, ord, e.Key, value, u.Expiration)
			a.rows = appendEntry(a.rows, vi, a.row)
		}
	}
	if a.log != nil {
		a.log = appendBytes(appendBytes(a.log, []byte(u.DocID)), a.rows)
	}
	a.w.dirtyBytes += int64(len(a.rows)) + 64
	return a.replace(u.DocID, bytes.Clone(a.rows))
}

var jsonNull = []byte("null")

// appendEntry appends a row of view vi to a document's rows: uvarint view
// index, then the row as uvarint length and bytes. A document's rows are its
// back-index entry, and the rows in the trees are slices of it.
func appendEntry(rows []byte, vi int, r row) []byte {
	return appendBytes(binary.AppendUvarint(rows, uint64(vi)), r)
}

// forEachEntry calls fn with each row of a document's rows (see appendEntry).
func forEachEntry(rows []byte, fn func(vi int, r row) error) error {
	for d := (decoder{b: rows}); !d.done(); {
		vi, r := int(d.uvarint()), row(d.bytes())
		if d.err != nil {
			return d.err
		}
		if err := fn(vi, r); err != nil {
			return err
		}
	}
	return nil
}

// replace replaces the rows of document id in the trees and the back index
// with rows (see appendEntry, and validEntries for rows read from a file),
// which the index owns from now on.
func (a *applier) replace(id string, rows []byte) error {
	prev, had := a.back[id]
	err := forEachEntry(prev, func(vi int, r row) error {
		a.roots[vi] = a.w.delete(a.roots[vi], r.ck(), r.exp())
		if r.exp() != 0 {
			a.enc = expiryCK(a.enc[:0], r)
			a.expRoots[vi] = a.w.delete(a.expRoots[vi], a.enc, r.exp())
		}
		return nil
	})
	if err == nil {
		err = forEachEntry(rows, func(vi int, r row) error {
			a.roots[vi] = a.w.insert(a.roots[vi], r)
			if r.exp() != 0 {
				a.expRoots[vi] = a.w.insert(a.expRoots[vi], expiryRow(nil, r))
			}
			return nil
		})
	}
	if err != nil {
		return fmt.Errorf("rows of %q: %w", id, err)
	}
	if a.undo != nil {
		a.undo = append(a.undo, undo{id, prev, had})
	}
	switch {
	case len(rows) > 0:
		a.back[id] = rows
	case had:
		delete(a.back, id)
	}
	return nil
}

// validEntries reports whether rows is a well-formed sequence of entries (see
// appendEntry) of views below nviews.
func validEntries(rows []byte, nviews int) bool {
	err := forEachEntry(rows, func(vi int, r row) error {
		if vi >= nviews || !validRow(r) {
			return ErrCorrupt
		}
		return nil
	})
	return err == nil
}

// replay applies a log record written by update and returns its number of
// documents.
func (a *applier) replay(rec []byte) (int, error) {
	d := decoder{b: rec}
	docs := 0
	for ; !d.done(); docs++ {
		id, rows := string(d.bytes()), d.bytes()
		if d.err != nil || !validEntries(rows, len(a.roots)) {
			return docs, ErrCorrupt
		}
		if err := a.replace(id, bytes.Clone(rows)); err != nil {
			return docs, err
		}
	}
	return docs, d.err
}

func appendBytes(dst, b []byte) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(b))), b...)
}

// decoder reads uvarints and length-prefixed bytes; after a malformed input
// it returns zeros and sets err.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) done() bool { return len(d.b) == 0 || d.err != nil }

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = ErrCorrupt
		d.b = nil
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes() []byte {
	l := d.uvarint()
	if uint64(len(d.b)) < l {
		d.err = ErrCorrupt
		d.b = nil
		return nil
	}
	v := d.b[:l:l]
	d.b = d.b[l:]
	return v
}

// WriteBack writes the pages of what Applies changed and a paged index's
// pages do not hold yet (its log does: see Config.Cache), and empties the
// log. An index kept in memory, or a paged one with nothing held back,
// returns at once. A sink calls it when its feed goes quiet, so that an idle
// index holds no dirty leaves and its next Open has no log to replay.
func (ix *Index) WriteBack() (err error) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.closed.Load() {
		return ErrClosed
	}
	defer recoverPage(&err)
	return ix.writeBackLocked()
}

// HeldBack reports whether a paged index holds changes in memory that its
// file's pages do not (its log does): Applies since its last write-back.
func (ix *Index) HeldBack() bool {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return ix.ps != nil && ix.ps.isDirty()
}

// rewindUpdatesLocked appends to updates the deletion of every document the
// index holds rows of whose partition is one of rw's, in id order.
// REQUIRES: ix.mu.
func (ix *Index) rewindUpdatesLocked(updates []DocUpdate, rw *rewind) ([]DocUpdate, error) {
	in := make(map[int]bool, len(rw.parts))
	for _, p := range rw.parts {
		in[p] = true
	}
	add := func(id string) {
		if p := rw.partOf(id); in[p] {
			updates = append(updates, DocUpdate{DocID: id, Partition: uint16(p)})
		}
	}
	from := len(updates)
	if ix.ps == nil {
		for id := range ix.mu.back {
			add(id)
		}
	} else if err := ix.ps.eachDoc(add); err != nil {
		return nil, err
	}
	slices.SortFunc(updates[from:], func(x, y DocUpdate) int { return strings.Compare(x.DocID, y.DocID) })
	return updates, nil
}
