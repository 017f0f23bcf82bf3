package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
)

// ErrCheck is wrapped by every error Check returns: an invariant of the
// engine's state does not hold.
var ErrCheck = errors.New("engine: check failed")

// maxCheckProblems is how many violations one Check reports.
const maxCheckProblems = 10

// Check verifies every bucket (see Bucket.Check).
func (e *Engine) Check(ctx context.Context) error {
	if e.isClosed() {
		return ErrClosed
	}
	var errs []error
	for _, b := range e.Buckets() {
		if err := b.Check(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// checker collects violations.
type checker struct {
	bucket   string
	problems []string
	more     int
}

func (c *checker) addf(format string, args ...any) {
	if len(c.problems) == maxCheckProblems {
		c.more++
		return
	}
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
}

func (c *checker) err() error {
	if len(c.problems) == 0 {
		return nil
	}
	msg := fmt.Sprintf("bucket %s: %d problem(s)", c.bucket, len(c.problems)+c.more)
	for _, p := range c.problems {
		msg += "\n\t" + p
	}
	if c.more > 0 {
		msg += fmt.Sprintf("\n\t... and %d more", c.more)
	}
	return fmt.Errorf("%w: %s", ErrCheck, msg)
}

// Check verifies the bucket's invariants and returns an error wrapping
// ErrCheck that lists what does not hold:
//   - every document is stored under its own key, collection and partition,
//     with a sequence number the partition has committed, and is listed in
//     the partition's change log, which is in sequence order;
//   - the counters (curr_items, tombstones, ep_kv_size, each partition's
//     counts) equal a count of the documents;
//   - a partition's Bloom filter, if it keeps one, answers for each of
//     its documents;
//   - the expiry index holds exactly the live documents with an expiration;
//   - nothing is waiting for disk once queued writes are flushed;
//   - the failover log is well formed;
//   - the store holds each partition's committed sequence number, a CAS
//     at least every document's, and the failover log; a durable one (a
//     persistent bucket's file) also holds exactly the committed documents
//     (tombstones included, an expiration's too) and their expiry entries.
//
// It waits for queued writes first, and is meant for a quiet bucket (test
// cleanups, a tool): a write made while it runs may show as a violation.
func (b *Bucket) Check(ctx context.Context) error {
	if err := b.WaitWarm(ctx); err != nil {
		return err
	}
	if err := b.Sync(ctx); err != nil && !errors.Is(err, ErrStorage) {
		return err
	}
	c := &checker{bucket: b.name}
	var live, tombs, kv, tombKV, nonResident int64
	var exps []expItem
	liveIn := make(map[CollectionID]int64) // live documents by collection
	type partColl struct {
		part uint16
		cid  CollectionID
	}
	pLiveIn := make(map[partColl]int64)      // live documents by partition and collection
	pLiveCounted := make(map[partColl]int64) // what the partitions count (partition.mu.live)
	committed := make(map[docKey]*Document)
	durable := make([]uint64, len(b.parts))
	evicted := make([]uint64, len(b.parts)) // each partition's evictedMax
	pLive, pTombs := make([]int64, len(b.parts)), make([]int64, len(b.parts))
	pItems, pTombsCounted := make([]int64, len(b.parts)), make([]int64, len(b.parts))
	var maxCAS uint64
	for _, p := range b.parts {
		if err := ctx.Err(); err != nil {
			return err
		}
		p.mu.RLock()
		if n := len(p.mu.pending); n > 0 {
			c.addf("partition %d: %d writes still pending after a flush", p.id, n)
		}
		if p.mu.durable > p.mu.seq {
			c.addf("partition %d: committed sequence number %d above the last given out, %d", p.id, p.mu.durable, p.mu.seq)
		}
		if now := p.seqNow.Load(); now != p.mu.seq {
			c.addf("partition %d: lock-free sequence number %d is not the last given out, %d", p.id, now, p.mu.seq)
		}
		durable[p.id] = p.mu.durable
		evicted[p.id] = p.mu.evictedMax
		t := &p.mu.docs
		log := &p.mu.log
		logged := make(map[uint64]uint32, log.len())
		indexed := p.mu.logIndexed
		if indexed && len(p.mu.logTop) != log.len() {
			c.addf("partition %d: change log of %d entries has %d CAS maxima", p.id, log.len(), len(p.mu.logTop))
			indexed = false
		}
		for i := range log.len() {
			seq, slot := log.seq(i), log.slot(i)
			if i > 0 && log.seq(i-1) >= seq {
				c.addf("partition %d: change log out of order at %d (%d after %d)", p.id, i, seq, log.seq(i-1))
			}
			if int(slot) >= len(t.recs) {
				c.addf("partition %d: change log entry %d names record %d of %d", p.id, i, slot, len(t.recs))
				continue
			}
			logged[seq] = slot
			if !indexed {
				continue
			}
			if i > 0 && p.mu.logTop[i] < p.mu.logTop[i-1] {
				c.addf("partition %d: change log's CAS maximum falls at %d (%d after %d)", p.id, i, p.mu.logTop[i], p.mu.logTop[i-1])
			}
			// (An entry at or below evictedMax may lead again to a version
			// read back after it left memory whole, at the record its
			// entry named, after the maxima were taken: a reader before
			// evictedCAS reads the store for it. evict.go)
			if p.currentLocked(i) && t.recs[slot].cas > p.mu.logTop[i] && seq > p.mu.evictedMax {
				c.addf("partition %d: change log's CAS maximum %d at %d is below its document's CAS %d", p.id, p.mu.logTop[i], i, t.recs[slot].cas)
			}
		}
		c.checkTable(p)
		for slot := range t.recs {
			if t.recs[slot].bits()&recUsed == 0 {
				continue
			}
			k, d := t.key(uint32(slot)), t.doc(uint32(slot))
			committed[k] = d
			kv += docFootprint(d)
			maxCAS = max(maxCAS, d.CAS)
			switch {
			case d.Key != k.key || d.Collection != k.cid || d.Partition != p.id:
				c.addf("document %q (collection %d) stored under partition %d as %q (collection %d, partition %d)", k.key, k.cid, p.id, d.Key, d.Collection, d.Partition)
			case partitionOf(k.key, len(b.parts)) != p.id:
				c.addf("document %q in partition %d, hashes to %d", k.key, p.id, partitionOf(k.key, len(b.parts)))
			case d.Seq == 0 || d.Seq > p.mu.durable:
				c.addf("document %q: sequence number %d outside 1..%d (committed)", k.key, d.Seq, p.mu.durable)
			case logged[d.Seq] != uint32(slot) && d.Seq > p.mu.evictedMax:
				// (A version read back after it left memory whole is not
				// in the log, which stays in sequence order: a feed reader
				// before evictedMax reads the store. evict.go)
				c.addf("document %q: sequence number %d missing from the change log", k.key, d.Seq)
			}
			if f := p.mu.bloom; f != nil && !f.mayHave(k) {
				c.addf("document %q (collection %d) is missing from partition %d's Bloom filter", k.key, k.cid, p.id)
			}
			if d.Deleted {
				tombs++
				pTombs[p.id]++
				tombKV += docFootprint(d)
				if d.Value != nil {
					c.addf("tombstone %q has a value", k.key)
				}
				continue
			}
			live++
			pLive[p.id]++
			liveIn[k.cid]++
			pLiveIn[partColl{p.id, k.cid}]++
			if d.ejected {
				nonResident++
				switch {
				case d.Value != nil:
					c.addf("document %q is ejected and holds a value", k.key)
				case !b.store.st.durable():
					c.addf("document %q is ejected from a bucket that keeps nothing on disk", k.key)
				}
			}
			if d.Expiration != 0 {
				exps = append(exps, expItem{exp: d.Expiration, key: k, size: d.valueSize()})
			}
		}
		pItems[p.id], pTombsCounted[p.id] = p.mu.items, p.mu.tombs
		for cid, n := range p.mu.live {
			pLiveCounted[partColl{p.id, cid}] = n
		}
		p.mu.RUnlock()
	}
	// Documents out of memory whole (evict.go) are the store's: they
	// count as the ones in memory do.
	out, err := b.checkDisk(c, committed, durable, evicted, maxCAS)
	if err != nil {
		return err
	}
	if n := b.mem.out.Load(); n != int64(len(out)) {
		c.addf("%d documents counted out of memory whole, the store holds %d that memory does not", n, len(out))
	}
	for _, d := range out {
		if d.Deleted {
			tombs++
			pTombs[d.Partition]++
			continue
		}
		live++
		pLive[d.Partition]++
		liveIn[d.Collection]++
		pLiveIn[partColl{d.Partition, d.Collection}]++
		nonResident++
		if d.Expiration != 0 {
			exps = append(exps, expItem{exp: d.Expiration, key: docKey{cid: d.Collection, key: d.Key}, size: d.valueSize()})
		}
	}
	for pc, n := range pLiveCounted {
		if pLiveIn[pc] != n {
			c.addf("partition %d counts %d live documents of collection %d, its documents count %d", pc.part, n, pc.cid, pLiveIn[pc])
		}
		delete(pLiveIn, pc)
	}
	for pc, n := range pLiveIn {
		c.addf("partition %d counts no live documents of collection %d, its documents count %d", pc.part, pc.cid, n)
	}
	for i := range b.parts {
		if pItems[i] != pLive[i] || pTombsCounted[i] != pTombs[i] {
			c.addf("partition %d counts %d live documents and %d tombstones, its documents count %d and %d", i, pItems[i], pTombsCounted[i], pLive[i], pTombs[i])
		}
	}
	if n := b.currItems.Load(); n != live {
		c.addf("curr_items is %d, the documents count %d", n, live)
	}
	b.live.Range(func(cid, v any) bool {
		if n := v.(*atomic.Int64).Load(); n != liveIn[cid.(CollectionID)] {
			c.addf("collection %d counts %d live documents, the documents count %d", cid, n, liveIn[cid.(CollectionID)])
		}
		delete(liveIn, cid.(CollectionID))
		return true
	})
	for cid, n := range liveIn {
		c.addf("collection %d counts no live documents, the documents count %d", cid, n)
	}
	if n := b.tombs.Load(); n != tombs {
		c.addf("tombstones counter is %d, the documents count %d", n, tombs)
	}
	if n := b.mem.kv.Load(); n != kv {
		c.addf("ep_kv_size is %d, the documents hold %d", n, kv)
	}
	if n := b.mem.nonResident.Load(); n != nonResident {
		c.addf("non-resident counter is %d, the documents count %d ejected values", n, nonResident)
	}
	if n := b.mem.tombKV.Load(); n != tombKV {
		c.addf("tombstones' part of ep_kv_size is %d, the tombstones hold %d", n, tombKV)
	}
	sortExpItems(exps)
	b.exps.mu.Lock()
	var indexed []expItem
	b.exps.tree.Ascend(func(it expItem) bool { indexed = append(indexed, it); return true })
	bySec := maps.Clone(b.exps.bySec)
	b.exps.mu.Unlock()
	wantSec := map[int64]secTotal{}
	for _, it := range indexed {
		t := wantSec[it.exp]
		t.docs++
		t.bytes += it.size
		wantSec[it.exp] = t
	}
	if !maps.Equal(wantSec, bySec) {
		c.addf("expiry index: per-second totals (%d seconds) disagree with its entries (%d seconds)", len(bySec), len(wantSec))
	}
	if !slices.Equal(exps, indexed) {
		c.addf("expiry index holds %d entries, the live documents with an expiration are %d (first difference: %s)", len(indexed), len(exps), firstExpDiff(exps, indexed))
	}
	hist := b.FailoverLog()
	seen := map[uint64]bool{}
	for _, e := range hist {
		if e.UUID == 0 || seen[e.UUID] {
			c.addf("failover log: UUID %d is zero or repeated", e.UUID)
		}
		seen[e.UUID] = true
		if e.Seqs != nil && len(e.Seqs) != len(b.parts) {
			c.addf("failover log: entry %d has %d sequence numbers for %d partitions", e.UUID, len(e.Seqs), len(b.parts))
		}
	}
	if len(hist) == 0 {
		c.addf("failover log is empty")
	}
	if err := b.checkDiskMeta(c, maxCAS, hist); err != nil {
		return err
	}
	return c.err()
}

// sortExpItems sorts expiry entries in the expiry index's order.
func sortExpItems(items []expItem) {
	slices.SortFunc(items, func(x, y expItem) int {
		switch {
		case expLess(x, y):
			return -1
		case expLess(y, x):
			return 1
		}
		return 0
	})
}

func firstExpDiff(want, got []expItem) string {
	for i := range max(len(want), len(got)) {
		switch {
		case i >= len(want):
			return fmt.Sprintf("extra entry %q at %d", got[i].key.key, got[i].exp)
		case i >= len(got) || want[i].exp != got[i].exp || want[i].key != got[i].key:
			return fmt.Sprintf("missing entry %q at %d", want[i].key.key, want[i].exp)
		case want[i].size != got[i].size:
			return fmt.Sprintf("entry %q at %d has size %d, the document %d", got[i].key.key, got[i].exp, got[i].size, want[i].size)
		}
	}
	return "none"
}

// checkDisk compares what the bucket's store holds with its committed
// state: the documents and their expiry entries where the store keeps them
// (a durable one), and each partition's sequence number. It returns the
// stored documents out of memory whole: live ones, at most at their
// partition's evictedMax.
func (b *Bucket) checkDisk(c *checker, committed map[docKey]*Document, durable, evicted []uint64, maxCAS uint64) ([]*Document, error) {
	st := b.store.st
	var out []*Document
	if st.durable() {
		out = b.checkStoredDocs(c, st, committed, evicted)
	}
	seqs, err := st.seqnos()
	if err != nil {
		return nil, err
	}
	for p, want := range durable {
		if got := seqs[uint16(p)]; got != want {
			c.addf("disk: partition %d sequence number %d, memory's committed %d", p, got, want)
		}
	}
	for _, d := range out {
		maxCAS = max(maxCAS, d.CAS)
	}
	return out, nil
}

// checkDiskMeta compares the store's CAS and failover log with memory's.
func (b *Bucket) checkDiskMeta(c *checker, maxCAS uint64, hist []FailoverEntry) error {
	m, err := b.store.st.meta()
	if err != nil {
		c.addf("disk: %v", err)
		return nil
	}
	if maxCAS != 0 && m.cas < maxCAS {
		c.addf("disk: stored CAS below a document's (%d)", maxCAS)
	}
	switch {
	case m.history == nil:
		c.addf("disk: no failover log")
	case !slices.EqualFunc(m.history, hist, func(x, y FailoverEntry) bool {
		return x.UUID == y.UUID && slices.Equal(x.Seqs, y.Seqs) && x.CAS == y.CAS
	}):
		c.addf("disk: failover log differs from memory's")
	}
	return nil
}

// sameValue reports whether stored version d holds committed version m's
// value: the same bytes, or, for an ejected m, the same length.
func sameValue(d, m *Document) bool {
	if m.ejected {
		return int64(len(d.Value)) == m.valueSize()
	}
	return bytes.Equal(d.Value, m.Value)
}

// checkStoredDocs compares the documents and expiry entries a durable store
// holds with the committed ones, and returns the stored documents (live and tombstones) that
// memory does not hold because they left it whole (evict.go: at most at
// their partition's evicted sequence number), each checked against its
// partition's Bloom filter.
func (b *Bucket) checkStoredDocs(c *checker, st storage, committed map[docKey]*Document, evicted []uint64) []*Document {
	onDisk := make(map[docKey]bool)
	var diskExps []expItem
	var out []*Document
	err := st.scan(func(d *Document) error {
		k := docKey{cid: d.Collection, key: d.Key}
		onDisk[k] = true
		if !d.Deleted && d.Expiration != 0 {
			diskExps = append(diskExps, expItem{exp: d.Expiration, key: k})
		}
		m := committed[k]
		switch {
		case m == nil && int(d.Partition) < len(evicted) && d.Seq <= evicted[d.Partition]:
			out = append(out, d) // (its filter is checked after the scan: no lock inside it)
		case m == nil:
			c.addf("disk: document %q (seq %d) is not in memory", k.key, d.Seq)
		case d.Seq != m.Seq || d.CAS != m.CAS || d.RevSeq != m.RevSeq || d.Flags != m.Flags ||
			d.Expiration != m.Expiration || d.Deleted != m.Deleted || d.Expired != m.Expired || d.DeletedAt != m.DeletedAt || d.Type != m.Type || !sameValue(d, m) ||
			d.TS != m.TS || d.CreatedAt != m.CreatedAt || d.ExpiryPinned != m.ExpiryPinned:
			c.addf("disk: document %q differs from memory (disk seq %d cas %d deleted %v expired %v, memory seq %d cas %d deleted %v expired %v)", k.key, d.Seq, d.CAS, d.Deleted, d.Expired, m.Seq, m.CAS, m.Deleted, m.Expired)
		}
		return nil
	})
	if err != nil {
		c.addf("disk: %v", err)
		return out
	}
	for k, m := range committed {
		if !onDisk[k] {
			c.addf("document %q (seq %d) is in memory, not on disk", k.key, m.Seq)
		}
	}
	var stored []expItem
	if err := st.expiries(func(it expItem) error { stored = append(stored, it); return nil }); err != nil {
		c.addf("disk: %v", err)
		return out
	}
	sortExpItems(diskExps)
	if !slices.Equal(diskExps, stored) {
		c.addf("disk: expiry entries (%d) differ from the stored documents' expirations (%d): %s", len(stored), len(diskExps), firstExpDiff(diskExps, stored))
	}
	for _, d := range out {
		p := b.parts[d.Partition]
		p.mu.RLock()
		if f := p.mu.bloom; f == nil || !f.mayHave(docKey{cid: d.Collection, key: d.Key}) {
			c.addf("disk: document %q, out of memory, is missing from partition %d's Bloom filter", d.Key, p.id)
		}
		p.mu.RUnlock()
	}
	return out
}

// checkTable checks partition p's table: its index finds every key it
// holds, at its own record, and nothing else; its counts of keys and arena
// bytes are its records'.
//
// REQUIRES: p.mu held.
func (c *checker) checkTable(p *partition) {
	t := &p.mu.docs
	used, bytes := 0, int64(0)
	refs := make([]uint32, len(t.chunks))
	for i := range t.recs {
		if t.recs[i].bits()&recUsed == 0 {
			continue
		}
		used++
		bytes += int64(t.entryLen(uint32(i)))
		if ch := t.recs[i].chunk; int(ch) >= len(t.chunks) || t.chunks[ch] == nil {
			c.addf("partition %d: record %d (%q) is in chunk %d, dropped or never made", p.id, i, t.keyOf(uint32(i)), ch)
		} else {
			refs[ch]++
		}
		if j, ok := t.find(t.key(uint32(i))); !ok || j != uint32(i) {
			c.addf("partition %d: record %d (%q) not found in the index (found %d, %v)", p.id, i, t.keyOf(uint32(i)), j, ok)
		}
	}
	entries := 0
	for _, e := range t.index {
		if e == 0 {
			continue
		}
		entries++
		if s := t.slotOf(e); int(s) >= len(t.recs) || t.recs[s].bits()&recUsed == 0 {
			c.addf("partition %d: the index names record %d, not in use", p.id, s)
		}
	}
	if used != t.n || entries != t.n {
		c.addf("partition %d: %d keys counted, %d records in use, %d index entries", p.id, t.n, used, entries)
	}
	if bytes != t.live {
		c.addf("partition %d: %d arena bytes counted live, the records use %d", p.id, t.live, bytes)
	}
	if !slices.Equal(refs, t.refs) {
		c.addf("partition %d: records counted in each chunk %v, the records are in %v", p.id, t.refs, refs)
	}
	var held int64
	for _, ch := range t.chunks {
		held += int64(len(ch))
	}
	if held != t.live+t.dead {
		c.addf("partition %d: the chunks hold %d bytes, %d counted live and %d dead", p.id, held, t.live, t.dead)
	}
}
