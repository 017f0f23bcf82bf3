// Package search is Mayfly's full-text search, in the mould of Couchbase's
// FTS service: indexes defined in Couchbase's shape, built with bleve (the
// library Couchbase FTS is built on, with scorch, its index format) from a
// bucket's change feed, and queried with bleve's query language, answering
// in Couchbase's shape.
//
// # Definitions
//
// An index definition is Couchbase's
//
//	{"type": "fulltext-index", "name": "hotels", "sourceType": "couchbase",
//	 "sourceName": "travel", "params": {"mapping": {...bleve mapping...}}}
//
// (see IndexDef; a missing mapping is bleve's dynamic default). It is stored
// durably as the bucket system document "_search/NAME", and an index follows
// its bucket's life: it opens with the bucket, and is removed with it. Only
// documents of _default._default are indexed, unless the definition's
// sourceCollection names another collection as "scope.collection", or its
// params.doc_config.mode is Couchbase 7's "scope.collection.type_field"
// with type mappings named "scope.collection[.TYPE]" (one collection per
// index). A document is indexed when it is a JSON object whose type mapping
// is enabled; tombstones, binary values and JSON that is not an object are
// removed from the index. Index names are unique across the buckets, as
// Couchbase's are.
//
// An index follows its collection by name. The engine does not tell
// change-feed consumers about a dropped collection's documents, so before
// every catch-up and query the index checks that the collection of that
// name is still the one it holds documents of (its ID is kept beside the
// feed position); when not (dropped, or dropped and created again), the
// index is emptied and starts over on the collection now of that name, if
// any: a dropped collection's documents leave the answers when the drop
// returns.
//
// # Aliases
//
// An alias definition, {"type": "fulltext-alias", "params": {"targets":
// {"idx1": {}, ...}}}, names full-text indexes of its bucket (stored like
// an index definition; SourceBucket finds the bucket from the targets when
// sourceName is omitted). A query or count of an alias runs on its targets
// together through bleve's index alias, each target's snapshot filtered for
// expiry like an index's own queries, the hits, totals and facets merged.
// A target that no longer exists makes the alias's queries fail with
// ErrNotFound.
//
// # Files
//
// For a persistent bucket, an index is a scorch folder beside the bucket's
// data: DIR/search/HASH.bleve, HASH being the first 16 bytes of the SHA-256
// of the index name, in hex (see IndexPath). An ephemeral bucket's indexes
// are scorch indexes in memory.
//
// # Following the feed
//
// Each index is a sink run by a feed.Consumer (the service's buckets are a
// feed.Registry), as view indexes are. A replaced definition's index is
// built at a staging path while the old one answers, then moved into place
// (closed, renamed and opened again, queries waiting meanwhile).
//
// One goroutine per index reads the change feed in batches (Options
// BatchSize documents, or fewer of BatchBytes of keys and values: bleve's
// analysis of a batch holds many times its bytes) and prepares the next batch (JSON decoding, mapping) while the
// previous one is written, each as one bleve batch holding, with the
// documents, the feed position it reaches (a sequence number per
// partition). The bucket's history UUID, the definition's signature and
// the source collection's ID are kept beside them. A batch returns once
// scorch holds it in memory (queries see it then); scorch writes it to disk
// in the background, alone or merged with the following ones, and at most
// four batches wait for that. Only when a batch is on disk (its persisted
// callback) does the index acknowledge its position to the bucket
// (Bucket.AckChanges; the index registers as a change-feed consumer
// "search:NAME", so tombstones are not purged before it has them on disk;
// NoSync and in-memory indexes acknowledge at once). Closing an index lets
// scorch write what it holds first. After a crash, an index resumes from
// the last position on disk. On open, an index resumes from its position; if the bucket no longer holds
// that position (Bucket.CheckPosition: a recreated or restored bucket, lost
// writes), or the files were built for another definition, it is rebuilt
// from scratch. While it runs, a partition the bucket's history went back
// in (the node's copy dropped) is rewound: its documents leave the index
// and its changes are read again from 0.
//
// # Expiry
//
// Every indexed document that expires carries its expiration in a field,
// _mayfly_exp (absolute Unix seconds as one zero-padded keyword term, so
// that terms sort as the numbers do; indexed, not stored, so it never shows
// in a hit's fields; a document field of that name is overwritten or
// dropped). Every query leaves out the documents with
// 0 < _mayfly_exp <= now, now being the engine clock's time when the query
// starts: a document leaves hits, total_hits and facet counts at the second
// it expires, before the expiry pager purges it. The filter works on the
// index snapshot the query reads: the documents expired at now are read
// from the postings of the _mayfly_exp values up to now, kept as a bitmap
// of the snapshot's document numbers (cached per snapshot and second), and
// removed from the query's matches before bleve collects, scores, sorts and
// counts them; scores do not change. A query costs a bit test per match
// (none at all when nothing expired waits for the pager), and the first
// query on a new snapshot or second reads the expired documents' postings.
// Indexes whose mapping has synonym sources use a must_not clause instead
// (bleve expands synonyms only in the query types it knows). Once purged,
// the document's tombstone reaches the index through the feed, which
// removes it.
//
// # Queries
//
// Query takes bleve's SearchRequest JSON (query, size, from, fields,
// highlight, facets, sort, explain, includeLocations, search_after) and
// Couchbase's ctl: timeout (milliseconds; Options.QueryTimeout, 10 s by
// default, when not given; 0 for none) and consistency level "at_plus",
// which first brings the index up to every write acknowledged before the
// query (the feed's high sequence numbers when the query starts; vectors
// are not needed). It answers bleve's SearchResult, which is Couchbase's
// shape: status, request (as given), hits (index, id, score, locations,
// fragments, fields, sort, explanation), total_hits, max_score, took (ns)
// and facets.
//
// # Errors
//
// A refused definition is a *DefError, a refused search request a
// *QueryError; a missing index wraps ErrNotFound, a closed one ErrClosed.
// The front doors decide what each becomes: httpapi answers the FTS
// service's REST API (/api/index/...) in Couchbase's shapes.
package search
