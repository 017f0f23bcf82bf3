package engine

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"unicode/utf8"
	"unsafe"

	"github.com/mayflydb/mayfly/internal/jsonstr"
)

// MaxKeyLen is the longest document key, in bytes.
const MaxKeyLen = 250

// MaxCollectionKeyLen is the longest key of a new document in a collection
// other than the default one, in bytes: Couchbase's limit there, where the
// collection's ID (up to 4 bytes, with its length) shares the 250 bytes of
// a stored key. Documents written with longer keys before the limit keep
// them.
const MaxCollectionKeyLen = 246

// MaxValueLen is the largest document value, in bytes (20 MiB).
const MaxValueLen = 20 * 1024 * 1024

// DocType says how a document's value is read: as JSON, or as opaque bytes that
// views see base64-encoded.
type DocType string

const (
	// TypeJSON marks a value that is valid JSON.
	TypeJSON DocType = "json"
	// TypeBinary marks any other value; Couchbase calls it "base64".
	TypeBinary DocType = "base64"
)

// DetectType returns TypeJSON for a value that is valid JSON in UTF-8, else
// TypeBinary. As Couchbase's checkUTF8JSON, invalid UTF-8 (inside a string)
// makes a value binary: a JSON document is copied as it is into every JSON
// answer (the document API, _all_docs, the change feed, views), which must
// be UTF-8 for a strict decoder to read them.
func DetectType(value []byte) DocType {
	if len(value) > 0 && jsonstr.Valid(value) && utf8.Valid(value) {
		return TypeJSON
	}
	return TypeBinary
}

// CollectionID names a collection inside its bucket. The default collection is 0.
type CollectionID uint32

// DefaultCollectionID is the ID of _default._default.
const DefaultCollectionID CollectionID = 0

// Document is one version of a document, or its tombstone. A Document is
// immutable once returned: every mutation makes a new one, so callers may
// keep and share it freely, and must not modify it (its Key and Value may
// share memory with the engine's own copy).
type Document struct {
	// The fields are ordered by size (Document is 136 bytes, a 144-byte
	// allocation, made on every read: engine/table.go), not by theme.

	// Key is the document ID.
	Key string
	// Value is the document body; nil for a tombstone.
	Value []byte
	// CAS changes on every mutation.
	CAS uint64
	// RevSeq counts the document's revisions, deletions included.
	RevSeq uint64
	// Seq is the partition's sequence number of the last mutation.
	Seq uint64
	// Expiration is absolute Unix seconds, 0 for never. An expiration's
	// tombstone keeps the expiration it reached; a delete's is 0.
	Expiration int64
	// Type says whether Value is JSON or binary.
	Type DocType
	// DeletedAt is when a tombstone was made (Unix seconds).
	DeletedAt int64
	// TS is the Unix time (seconds) of the last write of the value (insert,
	// upsert, replace), shown as meta.ts. Touches, sliding extensions and
	// defaultTTL re-evaluations leave it alone. 0 for a record written before
	// it was kept.
	TS int64
	// CreatedAt is the Unix time (seconds) of the write that made the
	// document live (its first write since it was missing, deleted or
	// expired), kept across updates and shown as meta.created. 0 for a
	// record written before it was kept.
	CreatedAt int64
	// Collection is the collection that holds the document.
	Collection CollectionID
	// Flags are the client's opaque 32-bit flags.
	Flags uint32
	// valueLen is an ejected version's value length, 0 otherwise.
	valueLen int32
	// Partition is the vBucket the key hashes to.
	Partition uint16
	// Deleted marks a tombstone.
	Deleted bool
	// Expired marks a tombstone made by expiry rather than by a delete.
	Expired bool
	// Created is set on the version a write returns when that write made a
	// live document where there was none (missing, deleted or expired). It is
	// not stored.
	Created bool
	// ExpiryPinned marks an expiration a client chose (a write with a
	// non-zero expiry, preserve_expiry, or a touch) rather than one the
	// collection's TTL settings derived: defaultTTL re-evaluations and sliding
	// reads leave a pinned expiration alone.
	ExpiryPinned bool

	// ejected marks a version of a couchbase bucket whose value left
	// memory (value eviction): Value is nil and valueLen holds the
	// value's length; the value is on disk, and the engine reads it back
	// (Bucket.withValue) before a Document leaves the engine, so no caller
	// ever sees an ejected version.
	ejected bool
}

// Rev returns the revision string views see as meta.rev:
// "<revSeq>-<hex of cas, expiration, flags>", as Couchbase builds it.
func (d *Document) Rev() string {
	return fmt.Sprintf("%d-%016x%08x%08x", d.RevSeq, d.CAS, uint32(d.Expiration), d.Flags)
}

// valueSize returns the length of d's value, resident or ejected.
func (d *Document) valueSize() int64 {
	if d.ejected {
		return int64(d.valueLen)
	}
	return int64(len(d.Value))
}

// withoutValue returns a copy of d, a live version, with its value
// ejected: the metadata-only version value eviction publishes in d's place
// (d itself, which other goroutines may hold, is left alone).
func (d *Document) withoutValue() *Document {
	e := d.copyMeta()
	e.ejected, e.valueLen = true, int32(len(d.Value))
	return e
}

// withValue returns a copy of d, an ejected version, carrying value: the
// resident version a read from the store gives back.
func (d *Document) withValue(value []byte) *Document {
	r := d.copyMeta()
	r.Value = value
	return r
}

// copyMeta copies every field of d but its value and the engine's own
// (ejected, valueLen, lru).
func (d *Document) copyMeta() *Document {
	return &Document{
		Key: d.Key, Collection: d.Collection, CAS: d.CAS, RevSeq: d.RevSeq, Seq: d.Seq,
		Partition: d.Partition, Flags: d.Flags, Expiration: d.Expiration, Type: d.Type,
		Deleted: d.Deleted, DeletedAt: d.DeletedAt, Expired: d.Expired, Created: d.Created,
		TS: d.TS, CreatedAt: d.CreatedAt, ExpiryPinned: d.ExpiryPinned,
	}
}

// ExpiredAt reports whether the document has expired at now (Unix seconds).
func (d *Document) ExpiredAt(now int64) bool { return isExpired(d.Expiration, now) }

// validateKey checks a key against the limits of DESIGN §2.
func validateKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty key", ErrInvalidKey)
	}
	if len(key) > MaxKeyLen {
		return fmt.Errorf("%w: key is %d bytes, the limit is %d", ErrInvalidKey, len(key), MaxKeyLen)
	}
	if !utf8.ValidString(key) {
		return fmt.Errorf("%w: key is not valid UTF-8", ErrInvalidKey)
	}
	return nil
}

// ValidateKey checks a document key: 1 to MaxKeyLen bytes of valid UTF-8.
func ValidateKey(key string) error { return validateKey(key) }

// Persistent record layout (version 2):
//
//	byte    version
//	byte    bits: 1 deleted, 2 binary, 4 expired, 8 expiry pinned
//	uvarint cas, revSeq, seq, partition, flags
//	varint  expiration, deletedAt, ts, createdAt
//	rest    value
//
// Version 1 records (no ts, createdAt, pinned bit) still decode, with TS and
// CreatedAt 0; the next write of the document stores it as version 2.
const recordVersion = 2

func encodeDoc(d *Document) []byte {
	return appendDocRecord(make([]byte, 0, 2+6*binary.MaxVarintLen64+len(d.Value)), d)
}

// appendDocRecord appends d's persistent record (encodeDoc's) to buf.
func appendDocRecord(buf []byte, d *Document) []byte {
	var bits byte
	if d.Deleted {
		bits |= 1
	}
	if d.Type == TypeBinary {
		bits |= 2
	}
	if d.Expired {
		bits |= 4
	}
	if d.ExpiryPinned {
		bits |= 8
	}
	buf = append(buf, recordVersion, bits)
	buf = binary.AppendUvarint(buf, d.CAS)
	buf = binary.AppendUvarint(buf, d.RevSeq)
	buf = binary.AppendUvarint(buf, d.Seq)
	buf = binary.AppendUvarint(buf, uint64(d.Partition))
	buf = binary.AppendUvarint(buf, uint64(d.Flags))
	buf = binary.AppendVarint(buf, d.Expiration)
	buf = binary.AppendVarint(buf, d.DeletedAt)
	buf = binary.AppendVarint(buf, d.TS)
	buf = binary.AppendVarint(buf, d.CreatedAt)
	return append(buf, d.Value...)
}

// docRecordLen returns the length of d's persistent record
// (appendDocRecord's).
func docRecordLen(d *Document) int {
	n := 2 + len(d.Value)
	for _, u := range [...]uint64{d.CAS, d.RevSeq, d.Seq, uint64(d.Partition), uint64(d.Flags)} {
		n += uvarintLen(u)
	}
	for _, v := range [...]int64{d.Expiration, d.DeletedAt, d.TS, d.CreatedAt} {
		n += uvarintLen(uint64(v)<<1 ^ uint64(v>>63)) // zig-zag, as binary.AppendVarint
	}
	return n
}

// uvarintLen returns the length of u as binary.AppendUvarint writes it.
func uvarintLen(u uint64) int { return 1 + (bits.Len64(u|1)-1)/7 }

// decodeDocRecord decodes a stored document record: its store key (the
// collection's 4 bytes, then the document key, as both stores write it)
// and its encoded value.
func decodeDocRecord(k, v []byte) (*Document, error) {
	dk, err := docKeyOf(k)
	if err != nil {
		return nil, err
	}
	return decodeDoc(dk.cid, string(k[4:]), v)
}

// docKeyOf returns the docKey of a document's store key (without the
// store's prefix): be32(collection) key. Its key aliases k.
func docKeyOf(k []byte) (docKey, error) {
	if len(k) < 5 {
		return docKey{}, fmt.Errorf("engine: corrupt document key %x", k)
	}
	return docKey{cid: CollectionID(binary.BigEndian.Uint32(k)), key: unsafe.String(&k[4], len(k)-4)}, nil
}

func decodeDoc(cid CollectionID, key string, b []byte) (*Document, error) {
	if len(b) < 2 || (b[0] != 1 && b[0] != recordVersion) {
		return nil, fmt.Errorf("engine: document %q: unknown record version", key)
	}
	d := &Document{Key: key, Collection: cid, Type: TypeJSON}
	bits := b[1]
	version := b[0]
	d.Deleted, d.Expired, d.ExpiryPinned = bits&1 != 0, bits&4 != 0, bits&8 != 0
	if bits&2 != 0 {
		d.Type = TypeBinary
	}
	b = b[2:]
	var u [5]uint64
	for i := range u {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return nil, fmt.Errorf("engine: document %q: corrupt record", key)
		}
		u[i], b = v, b[n:]
	}
	var s [4]int64
	ns := 2
	if version >= 2 {
		ns = 4
	}
	for i := range s[:ns] {
		v, n := binary.Varint(b)
		if n <= 0 {
			return nil, fmt.Errorf("engine: document %q: corrupt record", key)
		}
		s[i], b = v, b[n:]
	}
	d.CAS, d.RevSeq, d.Seq, d.Partition, d.Flags = u[0], u[1], u[2], uint16(u[3]), uint32(u[4])
	d.Expiration, d.DeletedAt, d.TS, d.CreatedAt = s[0], s[1], s[2], s[3]
	if !d.Deleted {
		d.Value = append([]byte(nil), b...)
	}
	return d, nil
}
