// Package kv is Mayfly's binary KV port: memcached's binary protocol with
// Couchbase's extensions, so that the official Couchbase SDKs (gocb, and
// others built the same way) bootstrap and do key-value work against
// Mayfly unmodified. It is a front door like memcache: every operation
// goes through the same engine calls as the HTTP API and the memcached
// text port (same expiry and maxTTL rules, same change feed, views and
// search), and it serves every bucket.
//
// Packets are read and written with gocbcore's memd package; this package
// checks each header first (magic, lengths, framing extras) and bounds the
// body before anything is allocated, so a malformed or oversized packet
// gets an error answer and a closed connection. Answers leave in request
// order; a connection whose unsent answers hold answerBytes (1 MiB) reads
// and answers no more of its requests until its client reads (conn.go).
//
// What a connection can do:
//
//   - Bootstrap: HELLO (XERROR, SELECT_BUCKET, JSON, collections,
//     alternative request framing, TCP nodelay, sequence numbers, xattrs,
//     preserve-expiry, sync replication, sub-document replica reads), GET_ERROR_MAP (versions 1 and 2), SASL_LIST_MECHS,
//     SASL_AUTH and SASL_STEP with SCRAM-SHA512, SCRAM-SHA256, SCRAM-SHA1
//     (the stored credentials of package auth) and PLAIN, against the auth
//     package's users,
//     SELECT_BUCKET, GET_CLUSTER_CONFIG (package internal/clusterconfig),
//     NOOP.
//   - Key-value: GET, GETQ, GETK, GETKQ, GET_META, SET, ADD, REPLACE,
//     APPEND, PREPEND, DELETE, TOUCH, GAT, INCREMENT, DECREMENT,
//     GET_COLLECTION_ID, STAT (the cbstats names of package
//     internal/cbstats, as `mayfly stats` prints them),
//     COLLECTIONS_GET_MANIFEST, SUBDOC_MULTI_LOOKUP for plain JSON paths
//     and the virtual extended attributes $document, $document.exptime,
//     $document.CAS, $document.flags and friends, and
//     SUBDOC_MULTI_MUTATION for plain JSON paths (mutate.go), and the
//     single-path commands (SUBDOC_GET, SUBDOC_EXISTS, SUBDOC_GET_COUNT,
//     SUBDOC_DICT_ADD, SUBDOC_DICT_UPSERT, SUBDOC_DELETE, SUBDOC_REPLACE,
//     SUBDOC_ARRAY_PUSH_LAST/FIRST, SUBDOC_ARRAY_INSERT,
//     SUBDOC_ARRAY_ADD_UNIQUE, SUBDOC_COUNTER) on the same code, the
//     path's status (PATH_ENOENT, PATH_MISMATCH, PATH_EEXISTS,
//     DOC_NOT_JSON, ...) the answer's.
//   - Copies of a partition (replica.go): GET_REPLICA, OBSERVE_SEQNO, and
//     the sub-document lookups with the replica-read document flag, which
//     a node holding a replica answers from its copy.
//
// Anything else is UNKNOWN_COMMAND. Reads need the data_reader role on the
// selected bucket and writes data_writer; a missing one is EACCESS.
// Failed logins are audited as the HTTP API's are.
package kv
