package engine

import (
	"hash/maphash"
	"sync/atomic"
	"unsafe"
)

// A partition keeps its committed versions in a docTable rather than as one
// *Document each: a fixed-size, pointer-free record per key (docRec), the
// keys and resident values packed into append-only arena chunks, and an
// open-addressing hash index of record numbers. The collector finds no
// pointer to chase in any of them (a chunk is one []byte; the records and
// the index are one slice each), and a document costs its record, its
// index slot and its bytes, not a map slot, a Document, a key string and a
// value slice, each its own allocation.
//
// A *Document is made from a record when a version leaves the table (doc):
// its Key and Value alias the chunk, which is never written where it was
// written before (appends go past its length; a full chunk is followed by a
// new one; live entries of chunks mostly dead are copied into new
// ones, maybeCompact), so the version a reader holds stays as it was, and
// keeps the old chunk alive for as long as it is held.
//
// Every method REQUIRES the partition's lock: held for writing by those
// that change the table, for reading at least by the others.
type docTable struct {
	// The fields a read uses (find, doc) come first: with the partition's
	// lock and acked before them they share the partition's first two
	// cache lines.
	slotBits int32 // 24 until a partition holds 2^24 records, then more
	part     uint16
	seed     maphash.Seed
	// index holds, per slot, 0 (empty) or an entry: record number + 1 in
	// the low slotBits bits, and above them a tag, bits of the key's hash
	// (linear probing). A search compares a record's key only when the
	// tag matches, so it touches about one record, not one a probe.
	index []uint32
	recs  []docRec
	// chunks are the arena: keys and resident values, each record's key
	// followed by its value, at recs[i].chunk, recs[i].off.
	chunks [][]byte
	cur    int // the chunk small entries with a value go to, -1 before the first
	n      int // keys held (records in use)
	// refs counts, per chunk, the records in use whose entry is in it. A
	// chunk no record uses any more is dropped at once (its place in
	// chunks is kept, nil, until the next compaction renumbers them). The
	// entries without a value (ejected values' keys, tombstones) go to
	// chunks of their own, keyCur's, and an ejection moves its key there
	// (eject): so the values of a bucket that ejects them in about the
	// order they were written free their chunks whole, with nothing
	// copied, instead of waiting as dead bytes for maybeCompact.
	refs   []uint32
	keyCur int      // the chunk small entries without a value go to, -1 before the first
	free   []uint32 // record numbers free for reuse
	live   int64    // arena bytes the records use
	dead   int64    // arena bytes no record uses any more
	// wide holds what a record's narrow fields cannot: times outside
	// uint32 seconds, and a DocType other than "", json and base64.
	wide map[uint32]wideFields
}

// docRec is one key's committed version, 56 bytes. Times are Unix seconds
// in uint32 (to 2106) and the revision count a uint32; a tombstone's
// DeletedAt takes the place of its CreatedAt, which a tombstone has not
// (0). A version that does not fit goes to docTable.wide.
//
// meta holds the key's length (the low byte) and the rec* bits; the memory
// owner's recRef bit is set by readers holding the read lock, atomically,
// so every read of meta is atomic (bits).
type docRec struct {
	cas, seq                               uint64
	revSeq, exp, ts, createdAt             uint32
	flags, cid, chunk, off, valueLen, meta uint32
}

// docRecSize is the size of a record: what a version's metadata costs.
const docRecSize = int64(unsafe.Sizeof(docRec{}))

// Bits of docRec.meta, above the key's length.
const (
	recUsed     = 1 << 8  // the record holds a key
	recDeleted  = 1 << 9  // a tombstone
	recExpired  = 1 << 10 // an expiration's tombstone
	recPinned   = 1 << 11 // Document.ExpiryPinned
	recEjected  = 1 << 12 // the value is not resident (valueLen holds its length)
	recNilValue = 1 << 13 // a live version whose Value is nil (not empty)
	recWide     = 1 << 14 // docTable.wide holds the times and type
	recJSON     = 1 << 15 // Type is TypeJSON
	recBinary   = 1 << 16 // Type is TypeBinary
	// recQueued: the key is in the memory owner's queue; recRef: read since
	// it joined (memory.go).
	recQueued = 1 << 17
	recRef    = 1 << 18
)

// wideFields are a record's fields that did not fit it.
type wideFields struct {
	exp, deletedAt, ts, createdAt int64
	revSeq                        uint64
	typ                           DocType
}

// Arena chunk sizes: a partition's first chunk is small (a bucket has many
// partitions, and most hold little), and each new one, started when the
// last is full, is an eighth larger, up to chunkMax; an entry larger than
// bigEntry gets a chunk of its own.
const (
	chunkMin = 256
	chunkMax = 64 << 10
	bigEntry = 8 << 10
)

// compactMinDead is the fewest dead bytes an arena compacts (maybeCompact)
// and so about the most a small partition keeps: a bucket has 1,024
// partitions, and 4 KiB each held 1.6 MB of arenas for 1,000 keys of 100
// bytes overwritten (the memcached benchmark); the copy it costs is the
// live bytes, a fraction of the dead ones.
const compactMinDead = 1 << 10

func newDocTable(part uint16) docTable {
	return docTable{part: part, seed: maphash.MakeSeed(), cur: -1, keyCur: -1, slotBits: 24}
}

// entry returns the index entry of record i with tag.
func (t *docTable) entry(i, tag uint32) uint32 { return tag<<t.slotBits | (i + 1) }

// slotOf returns the record number of index entry e.
func (t *docTable) slotOf(e uint32) uint32 { return uint32(uint64(e)&(1<<t.slotBits-1)) - 1 }

// tagOf returns the tag of index entry e.
func (t *docTable) tagOf(e uint32) uint32 { return uint32(uint64(e) >> t.slotBits) }

// narrow reports whether v fits a record's uint32 seconds.
func narrow(v int64) bool { return v >= 0 && v <= 1<<32-1 }

// home returns the index slot where a search for key of collection cid
// starts: its hash mapped onto the index's length (which need not be a
// power of two, so that the index grows by half, not double).
// home also returns the key's tag (see index).
func (t *docTable) home(cid CollectionID, key string) (int, uint32) {
	h := maphash.String(t.seed, key) ^ uint64(cid)*0x9e3779b97f4a7c15
	return int((h >> 32) * uint64(len(t.index)) >> 32), uint32(h & (1<<(32-t.slotBits) - 1))
}

// next returns the index slot after j, wrapping.
func (t *docTable) next(j int) int {
	if j++; j == len(t.index) {
		return 0
	}
	return j
}

// keyOf returns record i's key, aliasing its chunk.
func (t *docTable) keyOf(i uint32) string {
	r := &t.recs[i]
	n := int(r.bits() & 0xff)
	if n == 0 {
		return ""
	}
	c := t.chunks[r.chunk]
	return unsafe.String(&c[r.off], n)
}

// find returns the record number of k.
func (t *docTable) find(k docKey) (uint32, bool) {
	if len(t.index) == 0 {
		return 0, false
	}
	i, tag := t.home(k.cid, k.key)
	// The current chunk, where the newest entries are, is looked up
	// before the index slot: it does not depend on the slot or the record,
	// so its cache miss overlaps theirs rather than following them.
	var cur []byte
	if t.cur >= 0 {
		cur = t.chunks[t.cur]
	}
	for ; ; i = t.next(i) {
		e := t.index[i]
		if e == 0 {
			return 0, false
		}
		if t.tagOf(e) != tag { // the tag spares reading the record
			continue
		}
		s := t.slotOf(e)
		r := &t.recs[s]
		n := int(r.bits() & 0xff)
		if CollectionID(r.cid) != k.cid || n != len(k.key) {
			continue
		}
		c := cur
		if int(r.chunk) != t.cur {
			c = t.chunks[r.chunk]
		}
		if string(c[r.off:int(r.off)+n]) == k.key {
			return s, true
		}
	}
}

// has reports whether the table holds a version of k.
func (t *docTable) has(k docKey) bool {
	_, ok := t.find(k)
	return ok
}

// get returns the committed version of k, nil if none.
func (t *docTable) get(k docKey) *Document {
	if i, ok := t.find(k); ok {
		return t.doc(i)
	}
	return nil
}

// doc makes the Document of record i.
func (t *docTable) doc(i uint32) *Document {
	return t.docInto(i, new(Document))
}

// docInto is doc that fills in d (all of it) instead of a new Document.
func (t *docTable) docInto(i uint32, d *Document) *Document {
	r := &t.recs[i]
	m := r.bits()
	*d = Document{
		Key: t.keyOf(i), Collection: CollectionID(r.cid), CAS: r.cas, RevSeq: uint64(r.revSeq), Seq: r.seq,
		Partition: t.part, Flags: r.flags, Expiration: int64(r.exp), TS: int64(r.ts),
		Deleted: m&recDeleted != 0, Expired: m&recExpired != 0, ExpiryPinned: m&recPinned != 0,
	}
	if d.Deleted {
		d.DeletedAt = int64(r.createdAt)
	} else {
		d.CreatedAt = int64(r.createdAt)
	}
	switch {
	case m&recJSON != 0:
		d.Type = TypeJSON
	case m&recBinary != 0:
		d.Type = TypeBinary
	}
	if m&recWide != 0 {
		w := t.wide[i]
		d.Expiration, d.DeletedAt, d.TS, d.CreatedAt, d.RevSeq, d.Type = w.exp, w.deletedAt, w.ts, w.createdAt, w.revSeq, w.typ
	}
	switch {
	case d.Deleted || m&recNilValue != 0:
	case m&recEjected != 0:
		d.ejected, d.valueLen = true, int32(r.valueLen)
	default:
		start := r.off + m&0xff
		end := start + r.valueLen
		d.Value = t.chunks[r.chunk][start:end:end]
	}
	return d
}

// version summarises record i for the counters and the memory owner.
func (t *docTable) version(i uint32) version {
	r := &t.recs[i]
	v := version{ok: true, cid: CollectionID(r.cid), seq: r.seq, cas: r.cas,
		deleted: r.bits()&recDeleted != 0, ejected: r.bits()&recEjected != 0, exp: int64(r.exp),
		size: int64(r.valueLen), keyLen: int64(r.bits() & 0xff)}
	if r.bits()&recWide != 0 {
		v.exp = t.wide[i].exp
	}
	return v
}

// version is what the counters, the expiry index and the memory owner need
// of a committed version, read off its record without making a Document.
type version struct {
	ok               bool // there is a version
	cid              CollectionID
	seq, cas         uint64
	deleted, ejected bool
	exp              int64 // its expiration
	size             int64 // its value's length, resident or not
	keyLen           int64
}

// live reports whether v is a live document.
func (v version) live() bool { return v.ok && !v.deleted }

// footprint is what v counts in ep_kv_size: its record, key and resident
// value.
func (v version) footprint() int64 {
	if !v.ok {
		return 0
	}
	f := docRecSize + v.keyLen
	if !v.ejected && !v.deleted {
		f += v.size
	}
	return f
}

// versionOfDoc summarises d (nil: no version) as the table would.
func versionOfDoc(d *Document) version {
	if d == nil {
		return version{}
	}
	return version{ok: true, cid: d.Collection, seq: d.Seq, cas: d.CAS, deleted: d.Deleted,
		ejected: d.ejected, exp: d.Expiration, size: d.valueSize(), keyLen: int64(len(d.Key))}
}

// put makes d the committed version of k, in the record k has or a new
// one, and returns its record number and the version it replaced (ok false
// if none). The memory owner's bits stay with the key.
func (t *docTable) put(k docKey, d *Document) (uint32, version) {
	i, ok := t.find(k)
	var old version
	keep := uint32(0)
	if ok {
		old = t.version(i)
		keep = t.recs[i].bits() & (recQueued | recRef)
		t.release(i)
	} else {
		i = t.alloc()
		t.insertIndex(i, k)
	}
	r := &t.recs[i]
	*r = docRec{cas: d.CAS, seq: d.Seq, flags: d.Flags, cid: uint32(d.Collection)}
	m := uint32(len(k.key)) | recUsed | keep
	if d.Deleted {
		m |= recDeleted
	}
	if d.Expired {
		m |= recExpired
	}
	if d.ExpiryPinned {
		m |= recPinned
	}
	var value []byte
	switch {
	case d.Deleted:
	case d.ejected:
		m |= recEjected
		r.valueLen = uint32(d.valueLen)
	case d.Value == nil:
		m |= recNilValue
	default:
		value = d.Value
		r.valueLen = uint32(len(value))
	}
	switch d.Type {
	case TypeJSON:
		m |= recJSON
	case TypeBinary:
		m |= recBinary
	}
	created, other := d.CreatedAt, d.DeletedAt // other must be 0
	if d.Deleted {
		created, other = d.DeletedAt, d.CreatedAt
	}
	if (d.Type == "" || d.Type == TypeJSON || d.Type == TypeBinary) && other == 0 && d.RevSeq <= 1<<32-1 &&
		narrow(d.Expiration) && narrow(d.TS) && narrow(created) {
		r.revSeq, r.exp, r.ts, r.createdAt = uint32(d.RevSeq), uint32(d.Expiration), uint32(d.TS), uint32(created)
		if t.wide != nil {
			delete(t.wide, i)
		}
	} else {
		m |= recWide
		if t.wide == nil {
			t.wide = make(map[uint32]wideFields)
		}
		t.wide[i] = wideFields{exp: d.Expiration, deletedAt: d.DeletedAt, ts: d.TS, createdAt: d.CreatedAt, revSeq: d.RevSeq, typ: d.Type}
	}
	r.meta = m
	r.chunk, r.off = t.appendEntry(k.key, value)
	t.maybeCompact()
	return i, old
}

// remove drops k's record and returns the version it held and whether it
// was in the memory owner's queue (then the record stays out of reuse until
// the queue lets it go: freeQueued).
func (t *docTable) remove(k docKey) (version, bool) {
	i, ok := t.find(k)
	if !ok {
		return version{}, false
	}
	old := t.version(i)
	queued := t.recs[i].bits()&recQueued != 0
	t.deleteIndex(i)
	t.release(i)
	if t.wide != nil {
		delete(t.wide, i)
	}
	t.recs[i] = docRec{}
	if queued {
		t.recs[i].meta = recQueued
	} else {
		t.free = append(t.free, i)
	}
	t.n--
	t.maybeCompact()
	return old, queued
}

// freeQueued lets record i, removed while queued, be reused. It reports
// whether i was such a record.
func (t *docTable) freeQueued(i uint32) bool {
	if int(i) >= len(t.recs) || t.recs[i].bits() != recQueued {
		return false
	}
	t.recs[i].meta = 0
	t.free = append(t.free, i)
	return true
}

// release counts record i's arena bytes as dead.
func (t *docTable) release(i uint32) {
	r := &t.recs[i]
	n := int64(r.bits() & 0xff)
	if r.bits()&(recDeleted|recEjected|recNilValue) == 0 {
		n += int64(r.valueLen)
	}
	t.live -= n
	t.dead += n
	t.unref(r.chunk)
}

// entryLen is the arena bytes record i uses.
func (t *docTable) entryLen(i uint32) int {
	r := &t.recs[i]
	n := int(r.bits() & 0xff)
	if r.bits()&(recDeleted|recEjected|recNilValue) == 0 {
		n += int(r.valueLen)
	}
	return n
}

// alloc returns a free record number.
func (t *docTable) alloc() uint32 {
	t.n++
	if n := len(t.free); n > 0 {
		i := t.free[n-1]
		t.free = t.free[:n-1]
		return i
	}
	t.recs = appendSlim(t.recs, docRec{})
	return uint32(len(t.recs) - 1)
}

// appendSlim is append growing s by an eighth, not append's doubling (and
// quarter past 256 elements): the table's records and the change log are
// most of a partition's heap, and append's spare capacity would add a
// quarter to it on average. The copies cost a constant a element,
// amortised.
func appendSlim[T any](s []T, v T) []T {
	if len(s) == cap(s) {
		g := make([]T, len(s), len(s)+max(16, len(s)/8))
		copy(g, s)
		s = g
	}
	return append(s, v)
}

// appendEntry appends key and value to the arena and returns where.
func (t *docTable) appendEntry(key string, value []byte) (chunk, off uint32) {
	n := len(key) + len(value)
	t.live += int64(n)
	if n > bigEntry {
		c := make([]byte, 0, n)
		c = append(append(c, key...), value...)
		t.chunks = append(t.chunks, c)
		t.refs = append(t.refs, 1)
		return uint32(len(t.chunks) - 1), 0
	}
	cur := &t.cur
	if len(value) == 0 {
		cur = &t.keyCur
	}
	if *cur < 0 || cap(t.chunks[*cur])-len(t.chunks[*cur]) < n {
		// A new chunk an eighth larger than the one that filled: nothing
		// is copied (copying a chunk into a larger one cost 8 bytes
		// copied and allocated per byte written, 2.9 KB per 100-byte
		// set at durability none), and the unused end of the newest
		// chunk stays within about an eighth of the arena.
		size := chunkMin
		if *cur >= 0 {
			size = cap(t.chunks[*cur]) + cap(t.chunks[*cur])/8
		}
		prev := *cur
		t.chunks = append(t.chunks, make([]byte, 0, max(n, min(chunkMax, size))))
		t.refs = append(t.refs, 0)
		*cur = len(t.chunks) - 1
		if prev >= 0 && t.refs[prev] == 0 {
			t.drop(uint32(prev)) // kept while it was a current chunk
		}
	}
	c := t.chunks[*cur]
	off = uint32(len(c))
	t.chunks[*cur] = append(append(c, key...), value...)
	t.refs[*cur]++
	return uint32(*cur), off
}

// unref counts one record fewer in chunk c, and drops c if it was the
// last, unless c is a current chunk (appendEntry drops that one when it
// starts the next).
func (t *docTable) unref(c uint32) {
	if t.refs[c]--; t.refs[c] == 0 && int(c) != t.cur && int(c) != t.keyCur {
		t.drop(c)
	}
}

// drop lets chunk c go: no record uses it, so every byte in it was counted
// dead. Versions that readers hold keep it alive until they let go.
func (t *docTable) drop(c uint32) {
	t.dead -= int64(len(t.chunks[c]))
	t.chunks[c] = nil
}

// maybeCompact copies the live entries into new chunks once dead bytes
// outnumber live ones (and are worth a copy): amortised, a constant cost a
// byte written. Versions that readers hold keep the old chunks.
func (t *docTable) maybeCompact() {
	if t.dead < compactMinDead || t.dead < t.live {
		return
	}
	// Bytes of the live entries that share chunks: with a value, and
	// without (appendEntry's two kinds of chunks).
	var small [2]int
	for i := range t.recs {
		if t.recs[i].bits()&recUsed != 0 {
			n, kind := t.entryLen(uint32(i)), 0
			if n == int(t.recs[i].bits()&0xff) {
				kind = 1 // no value
			}
			if n <= bigEntry {
				small[kind] += n
			}
		}
	}
	old := t.chunks
	t.chunks, t.refs, t.cur, t.keyCur, t.live, t.dead = nil, nil, -1, -1, 0, 0
	for kind, cur := range []*int{&t.cur, &t.keyCur} {
		if n := small[kind]; n > 0 { // one chunk for them and an eighth more
			t.chunks = append(t.chunks, make([]byte, 0, min(chunkMax, max(chunkMin, n+n/8))))
			t.refs = append(t.refs, 0)
			*cur = len(t.chunks) - 1
		}
	}
	for i := range t.recs {
		r := &t.recs[i]
		if r.bits()&recUsed == 0 {
			continue
		}
		c := old[r.chunk]
		e := c[r.off : int(r.off)+t.entryLen(uint32(i))]
		kl := r.bits() & 0xff
		r.chunk, r.off = t.appendEntry(string(e[:kl]), e[kl:])
	}
}

// insertIndex adds record i, of key k, to the index, growing it by half
// first when it would pass four fifths full.
func (t *docTable) insertIndex(i uint32, k docKey) {
	if t.n*5 > len(t.index)*4 {
		t.growIndex()
	}
	if uint64(i)+1 >= 1<<t.slotBits {
		// More records than entries can name: fewer tag bits.
		t.slotBits++
		t.rebuildIndex(len(t.index), int(t.slotBits)-1)
	}
	j, tag := t.home(k.cid, k.key)
	for t.index[j] != 0 {
		j = t.next(j)
	}
	t.index[j] = t.entry(i, tag)
}

func (t *docTable) growIndex() {
	t.rebuildIndex(max(16, len(t.index)+len(t.index)/2), int(t.slotBits))
}

// rebuildIndex makes the index n slots long and enters every record in it
// (with the tags of the current slotBits; its entries have oldBits).
func (t *docTable) rebuildIndex(n, oldBits int) {
	old := t.index
	t.index = make([]uint32, n)
	for _, e := range old {
		if e == 0 {
			continue
		}
		s := uint32(uint64(e)&(1<<oldBits-1)) - 1
		r := &t.recs[s]
		j, tag := t.home(CollectionID(r.cid), t.keyOf(s))
		for t.index[j] != 0 {
			j = t.next(j)
		}
		t.index[j] = t.entry(s, tag)
	}
}

// deleteIndex takes record i out of the index, shifting back the entries
// after it that would no longer be found (linear probing keeps no
// tombstones).
func (t *docTable) deleteIndex(i uint32) {
	r := &t.recs[i]
	pos, _ := t.home(CollectionID(r.cid), t.keyOf(i))
	for t.index[pos] == 0 || t.slotOf(t.index[pos]) != i {
		pos = t.next(pos)
	}
	for j := pos; ; {
		j = t.next(j)
		e := t.index[j]
		if e == 0 {
			t.index[pos] = 0
			return
		}
		es := t.slotOf(e)
		h, _ := t.home(CollectionID(t.recs[es].cid), t.keyOf(es))
		// e may move to pos unless its home h lies cyclically in (pos, j].
		if (pos <= j && pos < h && h <= j) || (pos > j && (pos < h || h <= j)) {
			continue
		}
		t.index[pos] = e
		pos = j
	}
}

// each calls fn with every record number in use, until fn returns false.
// fn may remove the record it is given.
func (t *docTable) each(fn func(i uint32) bool) {
	for i := range t.recs {
		if t.recs[i].bits()&recUsed != 0 && !fn(uint32(i)) {
			return
		}
	}
}

// key returns record i's docKey (its key aliasing the arena).
func (t *docTable) key(i uint32) docKey {
	return docKey{cid: CollectionID(t.recs[i].cid), key: t.keyOf(i)}
}

// touch sets record i's recRef bit. It REQUIRES the partition's lock held
// for reading at least: readers set it concurrently.
func (t *docTable) touch(i uint32) {
	if atomic.LoadUint32(&t.recs[i].meta)&recRef == 0 {
		atomic.OrUint32(&t.recs[i].meta, recRef)
	}
}

// same reports whether record i holds version d (the same sequence number,
// CAS, and value residence).
func (t *docTable) same(i uint32, d *Document) bool {
	r := &t.recs[i]
	return r.seq == d.Seq && r.cas == d.CAS && (r.bits()&recEjected != 0) == d.ejected && (r.bits()&recDeleted != 0) == d.Deleted
}

// bits returns r.meta. Readers load it atomically: others holding the
// read lock may be setting recRef.
func (r *docRec) bits() uint32 { return atomic.LoadUint32(&r.meta) }

// deletedAt returns record i's DeletedAt.
func (t *docTable) deletedAt(i uint32) int64 {
	if t.recs[i].bits()&recWide != 0 {
		return t.wide[i].deletedAt
	}
	if t.recs[i].bits()&recDeleted == 0 {
		return 0
	}
	return int64(t.recs[i].createdAt)
}

// eject drops record i's resident value: the record keeps its key and
// metadata, and valueLen the value's length. The key moves to the
// current chunk, so that the value's chunk, once the other entries in it
// are gone too, is dropped whole (refs): a bucket that ejects the values
// it wrote first frees its oldest chunks as it goes, rather than keeping
// them as dead bytes up to the live ones' size (a 5,000,000-document
// bucket at a 1 GiB quota held ~300 MiB of them, BENCHMARKS.md). It costs
// a copy of the key.
func (t *docTable) eject(i uint32) {
	r := &t.recs[i]
	key := t.keyOf(i) // aliases the old chunk, which it keeps alive until copied
	t.release(i)
	r.meta |= recEjected
	r.chunk, r.off = t.appendEntry(key, nil)
	t.maybeCompact()
}

// sparse reports whether the table's records are mostly free (at least
// shrinkMin more records than keys, and more free than in use), so that
// compactRecs is worth its copy: amortised, a constant cost per record
// freed.
func (t *docTable) sparse() bool {
	waste := len(t.recs) - t.n
	return waste >= shrinkMin && waste > t.n
}

// shrinkMin is the least number of free records a table compacts away.
const shrinkMin = 32

// compactRecs renumbers the records in use 0 to n-1, in their order, into
// a records slice of their size (and an eighth), rebuilds the index for
// them, and empties the free list: a table whose keys left memory gives
// the records and index slots back. It returns, for each old record
// number, its new number + 1, or 0 for a record that held no key (free, or
// removed while queued: limbo, which it counts). Whoever holds record
// numbers must map them (the change log: rebuilt; the LRU queue:
// memOwner.remapQueue).
func (t *docTable) compactRecs() (remap []uint32, limbo int) {
	remap = make([]uint32, len(t.recs))
	recs := make([]docRec, 0, t.n+t.n/8)
	var wide map[uint32]wideFields
	for i := range t.recs {
		r := &t.recs[i]
		if r.meta&recUsed == 0 {
			if r.meta == recQueued {
				limbo++
			}
			continue
		}
		j := uint32(len(recs))
		remap[i] = j + 1
		recs = append(recs, *r)
		if r.meta&recWide != 0 {
			if wide == nil {
				wide = make(map[uint32]wideFields)
			}
			wide[j] = t.wide[uint32(i)]
		}
	}
	t.recs, t.wide, t.free = recs, wide, nil
	t.index = make([]uint32, max(16, t.n+t.n/2))
	for i := range t.recs {
		r := &t.recs[i]
		j, tag := t.home(CollectionID(r.cid), t.keyOf(uint32(i)))
		for t.index[j] != 0 {
			j = t.next(j)
		}
		t.index[j] = t.entry(uint32(i), tag)
	}
	return remap, limbo
}
