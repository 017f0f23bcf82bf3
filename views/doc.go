// Package views runs Couchbase-style views: design documents of JavaScript
// map and reduce functions, kept up to date incrementally from a bucket's
// change feed, and queried with the full view API.
//
// A Service owns the design documents of every bucket of an engine. Each
// design document has one indexer goroutine that follows the bucket's change
// feed, maps each changed document through every view of the design document
// in one pass (jsruntime), and writes the rows and the sequence numbers it
// reached in one index transaction (index). After a restart it resumes from
// those sequence numbers.
//
// The Service is an engine.BucketService: the engine attaches it to each
// bucket when the bucket opens or is created, and detaches it before the
// bucket closes or is deleted (a deleted bucket's indexes are closed and
// their files removed); the bookkeeping is a feed.Registry, and each
// indexer is a sink run by a feed.Consumer. Each indexer registers,
// durably, as a change-feed
// consumer of its bucket, so that no tombstone it has not seen is purged;
// when it opens, it checks its position against the bucket's history
// (engine.Bucket.CheckPosition) and rebuilds the index from scratch when the
// bucket no longer holds what the index was built from; while it runs, a
// partition the bucket's history went back in (the node's copy dropped) is
// rewound: its documents' rows leave the index and its changes are read
// again from 0 (index.Index.Rewind). Index files are named
// by a hash of the design document's ID. A stored design document that
// cannot be loaded is logged and skipped (Service.LoadErrors), never an
// obstacle to starting.
//
// Expiry: an expired document that has not been purged is still an item, so
// its rows stay in the index and in every reduce value, as in Couchbase; a
// query with include_docs shows "doc": null for it. When the document is
// purged (by the expiry pager, a read, or a delete) the deletion travels the
// change feed and its rows leave the index.
package views
