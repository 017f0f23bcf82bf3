// Package engine holds Mayfly's documents: buckets, scopes and collections,
// documents with Couchbase's metadata and expiry rules, the per-partition change
// feed, and persistence (to pebble or bbolt, behind an internal store seam).
//
// # Basics
//
// Open an Engine on a data directory, create or look up a Bucket, and work with a
// Collection:
//
//	eng, err := engine.Open(dir, nil)
//	b, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "default", Type: engine.Couchbase})
//	doc, err := b.DefaultCollection().Upsert(ctx, "k", []byte(`{"x":1}`), &engine.WriteOptions{Expiry: 10})
//
// # Memory and disk
//
// Every bucket keeps its documents in memory, sharded by partition (vBucket).
// A couchbase bucket also writes every mutation to a store in its folder: a
// pebble database (folder "pebble", the default for new buckets) or a bbolt
// file ("data.db", Options.Storage; a bucket keeps the store it was created
// with). Writes are batched (group commit) and a write returns only once its
// batch is on disk, so an acknowledged write survives a crash. An ephemeral
// bucket keeps nothing on disk but its definition. All go through one
// internal store interface: pebble and bbolt stores for couchbase buckets, a
// memory store (which keeps no documents, and commits in the writer) for the
// others. BENCHMARKS.md ("Storage engine") has the figures behind the
// default.
//
// Each bucket's memory owner (memory.go) holds its ramQuota: a couchbase
// bucket ejects the values of documents already on disk, least recently
// used first, keeping their keys and metadata, and reads an ejected value
// back from its file when a caller needs it (fetch.go); a Document handed
// out by the engine always carries its value.
//
// # Expiry
//
// Every expiry decision reads the Clock given in Options (whole Unix seconds).
// Expiry values follow Couchbase and memcached: 0 is none, 1..2592000 is relative,
// larger is an absolute Unix time, negative is already expired. The effective
// maxTTL is the collection's if non-zero (-1: never expire), else the bucket's.
// An expired document is invisible to reads; a read deletes it (lazy expiry,
// counted as ExpiredAccess), and Bucket.ExpireBatch purges expired documents in
// expiry order (the pager's cost tracks what has expired, not the bucket size).
// Until purged, an expired document still counts in CurrItems and still appears
// in the change feed as live. A purge writes the document's tombstone (deleted
// and expired) like any other write, so it survives a restart.
//
// A collection may also carry Cosmos DB's time to live (DefaultTTL and a
// document's top-level "ttl" field) and a sliding expiry (IdleTTL,
// MaxLifetime): see CollectionSettings for the precedence,
// Bucket.UpdateCollection for the re-evaluation a change runs, and
// Collection.Get for reads that slide the expiration without waiting for
// disk.
//
// # Change feed
//
// Every mutation gets the next sequence number of its partition. Bucket.Changes
// returns, per partition, the latest committed version of every document
// changed after a given sequence number, tombstones included;
// Bucket.WaitChanges blocks until there is something newer. The feed carries
// only what is durable: a write is published (to reads, the expiry index, the
// counters and the feed at once) when its batch is on disk, so no consumer
// ever sees a write that a crash or a failed commit takes back.
//
// # History and rollback
//
// Each bucket has a UUID and a failover log (Bucket.FailoverLog): a new
// history begins when the bucket is created and whenever it opens after a
// shutdown that was not clean. A consumer records the UUID with the sequence
// numbers it has seen and asks Bucket.CheckPosition when it starts; an error
// wrapping ErrRollback means the bucket no longer holds that position (lost
// writes, a recreated bucket, a restored backup) and the consumer must start
// over. A partition's copy dropped (DropPartition) begins a history too;
// Bucket.RollbackPartitions tells a running consumer which partitions it
// must forget and read again from 0. Consumers whose progress the metadata purge must wait for register
// durably (Bucket.RegisterConsumer).
//
// A consumer sees all of this through one handle, Bucket.Consumer(name):
// Register, Drop, Ack, CheckPosition, RollbackPartitions, UUID, HighSeqnos,
// Wait, and Changes,
// a Cursor that yields the feed as an iterator (iter.Seq) batch by batch
// without materialising it. Package feed runs consumers on it.
//
// # Disk failures
//
// A commit that fails (a full or failing disk) fails its writes and every
// write after it with an error wrapping ErrStorage and the cause; nothing of
// them is visible, reads go on, Stats says why, and a probe lets writes in
// again once the disk takes them.
//
// # Bucket life
//
// The Engine owns every bucket's life. Parts that keep state per bucket (view
// indexes, the expiry pager) implement BucketService and Attach to the
// engine, which tells them, in order, when a bucket opens, is created, closes
// or is deleted. Check verifies the engine's invariants, memory against disk.
package engine
