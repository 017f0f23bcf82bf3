// Package index stores the rows of map/reduce views: one Index per design
// document, holding for each view its rows ordered by key collation, with
// stored reductions, a back index from document id to rows, and the sequence
// number indexed so far in each partition.
//
// # Keys
//
// Keys are raw JSON, ordered as CouchDB and Couchbase order view keys (see
// Compare). EncodeKey maps a key to bytes whose byte order is that order, so a
// row's place is found with bytes.Compare alone. A row's tree key is its encoded
// key, its escaped document id, a terminator and its emit ordinal, so rows with
// equal keys order by document id and a document may emit one key twice.
//
// A row is one byte slice: its tree key, then its key JSON and value JSON. The
// rows a document emitted in all views are one allocation, which is also the
// document's entry in the back index (document id → rows): replacing or
// deleting a document removes exactly those rows. Rows hold no pointers, which
// keeps the garbage collector's work small however many there are.
//
// # Trees and snapshots
//
// Each view is an in-memory copy-on-write B+tree of rows (nodes of up to 64
// entries) whose inner nodes count their rows and cache the reduction of their
// subtree, computed on first use by Reducer.Reduce over a leaf's rows and
// Reducer.Rereduce over a node's children. Apply copies the nodes on the paths
// it changes (once per Apply: nodes created by the running Apply are changed in
// place) and publishes the new roots of all views, with the new sequence
// vector, in one atomic pointer store. A changed node is a new node with no
// cached reduction, so a change invalidates the reductions on its path and
// nothing else. Queries load the published snapshot once and read immutable
// nodes without locks: they never wait for Apply and Apply never waits for
// them; a snapshot stays valid, and consistent across views, for as long as a
// query holds it.
//
// A reduce over a key range combines, with one Rereduce, the cached reductions
// of the subtrees inside the range and the reductions of the rows at its two
// ends: O(log n) node reductions, whatever the number of rows. Grouped reduces
// find each group's first row by seeking, reduce the group as one range, and
// seek past it, so their cost follows the number of groups.
//
// # Expiry
//
// A row also carries its document's expiration (DocUpdate.Expiration), and
// every node the earliest non-zero expiration beneath it, kept by the writer
// as it keeps counts. A query with Range.ExcludeExpired answers exactly at
// its instant, as if expired documents were purged already: a node with
// nothing expired beneath answers with its count and cached reduction as
// before; under one that holds expired rows the query descends. A leaf's
// live rows at any instant are a suffix of its rows ordered by expiration,
// so a leaf caches once (atomically, as reductions are cached) its rows'
// expirations in that order and the reduction of each such suffix, which
// never go stale: at any instant it answers with a binary search, no
// Reducer call and no row read. An inner node caches the count and
// reduction of its live rows with the interval of instants over which they
// hold; a later query inside that interval reuses it, one after the next
// expiration beneath rereduces the paths where something expired since. So
// an exact answer costs about the expired rows the index still holds, and
// nothing is written on a read (see live.go).
//
// Each view also has an expiry tree: its rows that have an expiration,
// keyed by expiration, then document id and emit order, with cached
// reductions. Forecast over a whole view reduces the rows that expire in
// an interval as one key range of it (a forecast of a subset, Range.Include,
// walks the view's rows instead, as one narrowed by keys). An exact reduce of a whole view (no
// key range, group_level 0) and the exact total_rows do not descend at all:
// the live rows are those that never expire, whose number and reduction
// each node caches once computed (they never go stale: a published node's
// rows do not change), and the expiry tree's rows after the instant, one
// key range of it; so they cost O(log n) whatever expired since. The expiry tree is derived from the
// view's rows: Apply keeps it, and Open rebuilds it; it is not in the file.
//
// # Persistence
//
// With Config.Path set, the index also lives in a bbolt file, as a checkpoint
// plus a log. The checkpoint is one bucket per view holding the view's rows in
// key order, in blocks of about 32 KiB keyed by the tree key of their first
// row; the log holds one record per Apply since the checkpoint (the documents'
// ids and new rows); a meta bucket holds the format, signature, view names and
// the sequence vector. Each Apply appends its log record and the new sequence
// vector in one bbolt transaction, and publishes its changes to queries only
// once that has committed. When the log has grown to half the documents of the
// index (and at least 65536 documents), a new checkpoint is written in the
// background from the snapshot just published (immutable, copy-on-write), in
// short transactions into the other of two checkpoint slots, while Applies go
// on; one small transaction then switches to it, drops the old one and
// deletes the log records it covers. Close waits for it, and writes one more
// if the log is long. A checkpoint interrupted before its switch is dropped at
// Open.
// Open loads the checkpoint (bulk-loading the trees and rebuilding the back
// index from the rows' document ids) and replays the log, so a restart
// resumes at the stored sequence numbers. Reads never touch the file.
//
// Rows are not stored one bbolt key each, updated in place, because random
// puts into a large bbolt B+tree dirty about one page per row: measured here,
// about 54,000 rows/s at most for batches of 4096 rows, whatever else the
// index does. Appending a log record and rewriting the checkpoint
// sequentially now and then costs a few microseconds per row.
//
// Without a path the index lives in memory only.
//
// # Paged indexes
//
// With Config.Cache set as well, the index is paged instead: every node of
// its trees (views and expiry trees) is a page of the file, written
// copy-on-write by each Apply together with the roots, the sequence vector
// and the back index (a bucket of the file, read by Apply for the documents
// it updates) in one transaction, so a crash leaves the last commit. Inner
// nodes and each leaf's small record (count, earliest expiration, cached
// reductions) stay in memory; a leaf's rows are read from its page through
// the PageCache, a byte budget shared by any number of indexes. Open reads
// the inner pages only. The pages an Apply replaces are deleted by a later
// one once no query reads a snapshot that holds them (queries register the
// snapshot they read); bbolt reuses their space, so the file does not grow
// under updates. Reads that find a page missing or malformed fail with an
// error wrapping ErrCorrupt. See pager.go.
//
// # Checking
//
// Check verifies the invariants above on a quiet index: each tree's order,
// shape and counts, its cached reductions against a recomputation, the back
// index against the trees, and, with a file, that replaying the file gives
// what memory holds. The package's tests run it when they close an index.
package index
