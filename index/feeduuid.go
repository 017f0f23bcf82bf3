package index

import (
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// keyFeedUUID is the meta key of the feed history the sequence vector belongs to.
var keyFeedUUID = []byte("feeduuid") // 8 bytes big-endian

// FeedUUID returns the UUID of the change-feed history whose sequence numbers
// Seqs counts (0 when none was ever set). A consumer checks it, with Seqs,
// against its source's history when it opens the index, and rebuilds the index
// when the source no longer holds that position. Open resets it to 0 when it
// discards the stored rows (see Config.Signature).
func (ix *Index) FeedUUID() uint64 { return ix.feedUUID.Load() }

// SetFeedUUID records, durably for a persistent index, the UUID of the feed
// history the sequence vector now belongs to.
func (ix *Index) SetFeedUUID(u uint64) error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.closed.Load() {
		return ErrClosed
	}
	if ix.db != nil {
		// The vector the UUID belongs to is in the file already: each
		// Apply logs it.
		err := ix.db.Update(func(tx *bolt.Tx) error {
			return tx.Bucket(bucketMeta).Put(keyFeedUUID, binary.BigEndian.AppendUint64(nil, u))
		})
		if err != nil {
			return fmt.Errorf("index: write feed uuid: %w", err)
		}
	}
	ix.feedUUID.Store(u)
	return nil
}

// loadFeedUUID reads the stored feed UUID (0 when absent).
func loadFeedUUID(meta *bolt.Bucket) uint64 {
	if v := meta.Get(keyFeedUUID); len(v) == 8 {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

// keyMapped is the meta key of Mapped's count, written with each log record.
var keyMapped = []byte("mapped") // 8 bytes big-endian

// Mapped returns how many document updates with rows (DocUpdate.Rows not
// nil: live documents run through the map functions) the index has applied
// since its rows were last discarded. It is a property of the stored index:
// a persistent index keeps it in the same transaction as the rows, so it
// survives restarts.
func (ix *Index) Mapped() uint64 { return ix.mapped.Load() }

// loadMapped reads the stored Mapped count (0 when absent).
func loadMapped(meta *bolt.Bucket) uint64 {
	if v := meta.Get(keyMapped); len(v) == 8 {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}
