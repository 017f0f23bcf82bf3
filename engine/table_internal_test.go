package engine

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"unsafe"
)

// TestReadLayout guards what a read costs in memory: every get makes a
// Document, which must stay a 144-byte allocation (136 bytes, not the 160
// of a 152-byte one), and find and doc read only the partition's first two
// cache lines (its lock, acked, and the table's fields before n).
func TestReadLayout(t *testing.T) {
	if n := unsafe.Sizeof(Document{}); n > 136 {
		t.Errorf("Document is %d bytes, more than 136 (a 144-byte allocation)", n)
	}
	var p partition
	end := unsafe.Offsetof(p.mu.docs) + unsafe.Offsetof(p.mu.docs.n)
	if unsafe.Offsetof(p.mu) != 0 || unsafe.Offsetof(p.mu.acked) >= end || end > 128 {
		t.Errorf("a read's fields of partition end at byte %d (acked at %d), past its second cache line", end, unsafe.Offsetof(p.mu.acked))
	}
}

// TestDocTableModel drives a docTable with random writes, removals and
// ejections against a map of the versions it should hold: every key reads
// back as written (fields, value, tombstones, ejected values, times and
// revision counts too wide for a record), the index finds exactly the keys
// held, and a version read before its key was rewritten, removed or its
// chunk compacted keeps its key and value. The second run starts with 4
// bits of record number in an index entry, so the index is rebuilt with
// fewer tag bits as the records pass 16, 32, 64...
func TestDocTableModel(t *testing.T) {
	for _, bits := range []int{24, 4} {
		t.Run(fmt.Sprint(bits), func(t *testing.T) { testDocTableModel(t, bits) })
	}
}

func testDocTableModel(t *testing.T, slotBits int) {
	rng := rand.New(rand.NewPCG(1, 2))
	tab := newDocTable(3)
	tab.slotBits = int32(slotBits)
	model := map[docKey]*Document{}
	type held struct {
		d          *Document
		key, value string
	}
	var kept []held
	keyOf := func() docKey {
		return docKey{cid: CollectionID(rng.IntN(3)), key: fmt.Sprintf("key-%d", rng.IntN(400))}
	}
	for step := range 40_000 {
		k := keyOf()
		switch op := rng.IntN(10); {
		case op < 6:
			d := &Document{Key: k.key, Collection: k.cid, CAS: rng.Uint64(), Seq: uint64(step + 1),
				RevSeq: uint64(rng.IntN(1000)), Partition: 3, Flags: rng.Uint32(), Type: TypeJSON,
				TS: 1_700_000_000 + int64(step), CreatedAt: 1_600_000_000}
			switch rng.IntN(12) {
			case 0:
				d.Value = bytes.Repeat([]byte{'b'}, bigEntry+rng.IntN(100)) // a chunk of its own
			case 1:
				d.Deleted, d.Value, d.DeletedAt, d.CreatedAt, d.TS = true, nil, 1_700_000_001, 0, 0
				d.Expired = rng.IntN(2) == 0
			case 2:
				d.Value = nil // live, nil value
				d.Type = TypeBinary
			case 3:
				d.Expiration = -5 // outside uint32: wide
				d.Value = []byte("w")
			case 4:
				d.RevSeq = 1 << 40 // wide
				d.Value = []byte("r")
			case 5:
				d.Type = "" // as a tombstone may carry
				d.Value = []byte{}
			case 6:
				d.ExpiryPinned, d.Expiration = true, 1_800_000_000
				d.Value = []byte(fmt.Sprintf(`{"s":%d}`, step))
			default:
				d.Value = []byte(fmt.Sprintf(`{"step":%d,"pad":"%s"}`, step, bytes.Repeat([]byte{'x'}, rng.IntN(300))))
			}
			tab.put(k, d)
			model[k] = d
		case op < 8:
			_, queued := tab.remove(k)
			if queued {
				t.Fatalf("step %d: a removed record was queued; nothing queues here", step)
			}
			delete(model, k)
		case op < 9:
			if i, ok := tab.find(k); ok {
				if v := tab.version(i); !v.deleted && !v.ejected && tab.recs[i].bits()&recNilValue == 0 && v.size > 0 {
					tab.eject(i)
					e := model[k].withoutValue()
					e.Key, e.Collection, e.Partition = k.key, k.cid, 3
					model[k] = e
				}
			}
		default:
			if i, ok := tab.find(k); ok {
				d := tab.doc(i)
				kept = append(kept, held{d, d.Key, string(d.Value)})
			}
		}
		if step%997 == 0 || step == 39_999 {
			checkTableModel(t, &tab, model)
		}
	}
	for _, h := range kept {
		if h.d.Key != h.key || string(h.d.Value) != h.value {
			t.Fatalf("a version read earlier changed: %q %q, was %q %q", h.d.Key, h.d.Value, h.key, h.value)
		}
	}
	if slotBits < 24 && tab.slotBits <= 8 {
		t.Errorf("index entries have %d bits of record number for %d records", tab.slotBits, len(tab.recs))
	}
	if tab.dead > max(compactMinDead, tab.live) {
		t.Errorf("arena: %d dead bytes beside %d live ones, compaction should have run", tab.dead, tab.live)
	}
}

func checkTableModel(t *testing.T, tab *docTable, model map[docKey]*Document) {
	t.Helper()
	if tab.n != len(model) {
		t.Fatalf("table holds %d keys, want %d", tab.n, len(model))
	}
	for k, want := range model {
		got := tab.get(k)
		if got == nil {
			t.Fatalf("%v missing", k)
		}
		w := *want
		w.Created = false // not kept
		if !reflect.DeepEqual(got, &w) {
			t.Fatalf("%v reads back as\n%+v\nwant\n%+v", k, got, &w)
		}
	}
	c := &checker{}
	p := &partition{id: tab.part}
	p.mu.docs = *tab
	c.checkTable(p)
	if len(c.problems) > 0 {
		t.Fatalf("table check: %v", c.problems)
	}
	if tab.has(docKey{key: "never-written"}) {
		t.Fatal("a key never written is found")
	}
}

// TestChangeLogAcrossHighHalves: the change log keeps sequence numbers'
// high halves apart from its entries; entries on both sides of 2^32 (and of
// 2^33) read back whole and are found by after.
func TestChangeLogAcrossHighHalves(t *testing.T) {
	var l changeLog
	var seqs []uint64
	for _, base := range []uint64{5, 1<<32 - 3, 1<<33 - 2} {
		for i := range uint64(5) {
			seqs = append(seqs, base+i)
		}
	}
	for i, s := range seqs {
		l.add(s, uint32(i))
	}
	for i, s := range seqs {
		if got := l.seq(i); got != s || l.slot(i) != uint32(i) {
			t.Fatalf("entry %d: seq %d slot %d, want %d %d", i, got, l.slot(i), s, i)
		}
		if got := l.after(s - 1); got != i {
			t.Fatalf("after(%d) = %d, want %d", s-1, got, i)
		}
	}
	if got := l.after(seqs[len(seqs)-1]); got != len(seqs) {
		t.Fatalf("after the last: %d, want %d", got, len(seqs))
	}
}

// TestEjectFreesChunks: a table whose values are ejected in the order they
// were written (a couchbase bucket loading more than its quota) lets their
// chunks go as they empty, rather than keeping the dead values until they
// outnumber the live ones; every key still reads back, the resident values
// whole, the ejected ones as ejected, and the table checks.
func TestEjectFreesChunks(t *testing.T) {
	tab := newDocTable(0)
	const docs, resident = 3000, 300
	value := func(i int) []byte { return bytes.Repeat([]byte{byte('a' + i%26)}, 1000+i%50) }
	key := func(i int) docKey { return docKey{key: fmt.Sprintf("doc-%06d", i)} }
	for i := range docs {
		tab.put(key(i), &Document{Key: key(i).key, CAS: uint64(i + 1), Seq: uint64(i + 1), Type: TypeJSON, Value: value(i)})
		if j := i - resident; j >= 0 {
			s, ok := tab.find(key(j))
			if !ok {
				t.Fatalf("%v missing", key(j))
			}
			tab.eject(s)
		}
		if tab.dead > 2*chunkMax {
			t.Fatalf("after %d writes: %d dead bytes beside %d live: the emptied chunks were kept", i+1, tab.dead, tab.live)
		}
	}
	var held int64
	for _, c := range tab.chunks {
		held += int64(cap(c))
	}
	if held > tab.live+tab.live/4+2*chunkMax {
		t.Errorf("the chunks hold %d bytes for %d live", held, tab.live)
	}
	for i := range docs {
		d := tab.get(key(i))
		switch {
		case d == nil:
			t.Fatalf("%v missing", key(i))
		case i < docs-resident && (!d.ejected || d.Value != nil || int(d.valueLen) != len(value(i))):
			t.Fatalf("%v: ejected %v, value %d bytes, length %d; want ejected, %d", key(i), d.ejected, len(d.Value), d.valueLen, len(value(i)))
		case i >= docs-resident && !bytes.Equal(d.Value, value(i)):
			t.Fatalf("%v: value %.20q, want %.20q", key(i), d.Value, value(i))
		}
	}
	c := &checker{}
	p := &partition{id: tab.part}
	p.mu.docs = tab
	c.checkTable(p)
	if len(c.problems) > 0 {
		t.Fatalf("table check: %v", c.problems)
	}
}
