// Package changes is a bucket's public change feed, /{bucket}/_changes, in
// CouchDB's shape, so that code written for CouchDB's feed can follow it:
// rows {"seq","id","changes":[{"rev"}],"deleted"?,"expired"?,"doc"?}, answers
// {"results","last_seq","pending"}, and the normal, longpoll, continuous and
// eventsource modes.
//
// # Positions
//
// A replicator checkpoints the seq of the last row it applied, so every
// row's seq must be a place to resume from. The engine's sequence numbers
// are per partition; a position in them is a vector of 1,024, too large for
// every row. CAS is bucket-wide and, within a partition, rises with the
// sequence number, but a write can take its CAS before another and reach
// disk after it. The feed therefore reads in windows (c, w] of CAS, where w
// is the bucket's StableCAS: every write at or below it is visible, and any
// later one has a larger CAS. Within a window it goes partition by
// partition in sequence order. A row's seq is the history UUID, c, w, the
// partition and the sequence number; between windows, the UUID and c. It is
// base64url of varints, about 35 characters.
//
// # Backwards
//
// descending=true walks the feed from 0 backwards, as CouchDB does: the
// same rows in the opposite order, with the same seqs. The engine reads a
// partition's change log forwards only, so a partition is read in
// segments (reverse.go): a pass without values marks where each stride of
// rows begins, at most reverseMarks places, then the segments are read
// from the last, each reversed in memory when it is a chunk or less, or
// marked again. A walk holds a chunk of documents and a few places per
// level, and one with a limit reads only the partitions it reaches.
//
// A since from a history the bucket no longer holds (engine.CheckCASPosition:
// after a crash, one past the CAS the store had committed, which the new
// history records) or older than a deletion the metadata purge removed
// (engine.PurgedCAS) is refused with ErrRollback rather than answered with
// changes missing.
//
// # Memory
//
// A feed never holds the whole feed: it takes 128 documents at a time from
// the bucket and writes them through a 32 KiB buffer, flushing after each
// chunk, so a client that stops reading holds it at one chunk and one
// buffer, and one that goes ends it (its context, or a failed write).
// A heartbeat is sent by a goroutine of its own, under the writer's lock
// between whole rows, whenever nothing has been sent for its period: while
// the feed waits for a change, and while one long scan (a filter over a
// large bucket, a backfill from disk) sends nothing.
//
// # Costs
//
// Each partition's change log carries the running maximum of its CAS values
// (engine.ScanChanges), so a window's pass over a partition starts where
// the changes above the window's bottom start: a request that resumes from
// a since costs what changed after it, plus a binary search per partition.
// Counting pending after a limit is another such pass.
package changes
