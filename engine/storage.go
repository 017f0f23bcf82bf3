package engine

// storage is where a bucket keeps what it persists: the seam between the
// engine's in-memory state (partitions, expiry index, counters) and a medium.
// Two implementations: boltStorage (a couchbase bucket's bbolt file) and
// memStorage (ephemeral and memcached buckets: nothing outlives the process).
// The group-commit flusher (store) drives it; nothing else in the engine
// touches a medium.
//
// Documents are stored by key; a store that is not durable keeps none, nor
// their expiry entries (the partitions are their only copy), but keeps
// everything else (sequence numbers, CAS, metadata), so that the
// engine treats both the same way. Implementations are safe for concurrent
// use. A durable store's commits come from one goroutine at a time (the
// flusher); a store that is not durable is committed inline, by each writer.
type storage interface {
	// durable reports whether the store keeps documents, and everything it
	// is given, across a restart.
	durable() bool

	// encode returns r's document as commit will write it (nil when it
	// writes none). The store calls it in the writer's goroutine, so that
	// writers encode in parallel and the commit, which runs one at a time,
	// does less; commit encodes a record whose enc is nil itself.
	encode(r record) []byte
	// commit writes recs atomically, in order: a record's document (or
	// its removal, for a purge), its expiry-index entry, its partition's
	// sequence number (a purge's does not count) and the bucket's CAS
	// (which only ever rises). Later records of one key win over earlier
	// ones. Nothing of a failed commit is kept.
	commit(recs []record) error
	// commitOne is commit of one record: how the writers of a store that
	// is not durable commit, inline (a record passed by value costs no
	// allocation, a batch would).
	commitOne(r record) error
	// probe writes something small, to tell whether the medium takes
	// writes again after a failed commit.
	probe() error

	// doc returns the stored version of k, or an error wrapping
	// ErrNotFound when the store holds none. A read by key, for values
	// that are not in memory.
	doc(k docKey) (*Document, error)
	// scan calls fn with every stored document, in key order (warm-up,
	// checks), stopping at fn's first error.
	scan(fn func(*Document) error) error
	// expiries calls fn with every stored expiry-index entry, in
	// expiration order (its size is not stored), stopping at fn's first
	// error.
	expiries(fn func(expItem) error) error
	// seqnos returns each partition's committed high sequence number
	// (partitions that never committed are absent).
	seqnos() (map[uint16]uint64, error)
	// meta returns the bucket's stored metadata.
	meta() (storedMeta, error)

	// putSys durably writes a system document, or removes it when value is
	// nil.
	putSys(key string, value []byte) error
	// putConsumers durably replaces the list of registered change-feed
	// consumers.
	putConsumers(names []string) error
	// begin records the failover log of the history the bucket opens with
	// and removes the clean-close marker, in one step.
	begin(history []FailoverEntry) error
	// close closes the store; with clean set it first marks it cleanly
	// closed (see storedMeta.clean).
	close(clean bool) error
}

// storedMeta is a bucket's metadata as a store holds it.
type storedMeta struct {
	cas       uint64            // highest CAS committed
	consumers []string          // registered change-feed consumers
	history   []FailoverEntry   // failover log, newest first
	clean     bool              // the store was closed cleanly since begin
	sys       map[string][]byte // system documents (design documents…)
}

// record is one mutation on its way to a store.
type record struct {
	doc    *Document // the version to store and publish once committed (nil for a purge)
	enc    []byte    // doc as the store encodes it (see storage.encode), or nil
	purge  bool      // removes the key's stored record (metadata purge, dropped collection)
	key    docKey
	oldExp int64 // expiry entry the key's stored record holds (it goes), 0 for none
	part   uint16
	seq    uint64
	cas    uint64
}

// newExp returns the expiry-index entry a record leaves: a live document's
// expiration, or 0.
func (r *record) newExp() int64 {
	if r.purge || r.doc == nil || r.doc.Deleted {
		return 0
	}
	return r.doc.Expiration
}

// catalog is where an engine keeps its buckets' definitions.
type catalog interface {
	// entries returns every stored definition.
	entries() ([]catalogEntry, error)
	// put durably stores a bucket's definition, replacing any other of the
	// same name.
	put(ce catalogEntry) error
	// remove durably forgets the named bucket's definition.
	remove(name string) error
	close() error
}
