// Package memcache is Mayfly's memcached front door: a server of memcached's
// text protocol (as memcached 1.6 speaks it) onto one engine bucket, so any
// memcached client can store documents with an expiry.
//
// # Basics
//
//	srv, err := memcache.New(bucket, nil)
//	go srv.ListenAndServe(ctx, "127.0.0.1:11211")
//	...
//	srv.Close()
//
// The bucket served is the one given to New, its replacement once it
// restarts (engine.Bucket.Reopened), and, with Options.Lookup, the bucket
// of its name created again after it was deleted.
//
// Items are documents of the bucket's default collection: the key is the
// document ID, the value its body (a JSON document if it parses as JSON,
// else binary), the flags the document's flags, the cas unique its CAS.
//
// # Commands
//
// set, add, replace, append, prepend, cas, get, gets, gat, gats, touch,
// delete, incr, decr, flush_all [delay] [noreply] (refused, as memcached
// -F refuses it, on a bucket whose FlushEnabled is off), stats (general,
// settings, reset), version, verbosity and quit, with noreply wherever
// memcached takes it. Replies, error strings and the parsing of numbers
// follow memcached byte for byte; DIFFERENCES.md lists where Mayfly departs
// from it and why.
//
// # Expiry
//
// Expiry values go to the engine as the client gives them (0 none,
// 1..2592000 relative seconds, larger an absolute Unix time, negative
// expired at once), and every expiry decision, a delayed flush_all's
// included, reads the engine's clock. Touch and gat are engine mutations:
// they give the document a new CAS, where memcached keeps it.
//
// # Limits
//
// Options bound what one client can cost: MaxConns connections (one more is
// answered "ERROR Too many open connections" and closed), MaxLineLen and
// MaxGetLineLen bytes per command line (a longer line closes the
// connection, as memcached does), and MaxItemSize per item (a larger value
// is refused and its data swallowed).
//
// # Connections
//
// Options.IO chooses how connections are served. On Linux the default,
// IOEventLoop, runs one event loop per GOMAXPROCS on epoll: a loop reads
// what a socket has, runs every complete command in it and answers the
// batch in one write, with raw syscalls that never block and no goroutine
// switch per command (BENCHMARKS.md: 14-22% less server CPU per command).
// IOGoroutines, the default elsewhere, gives each connection a goroutine
// that blocks on its reads. Both run the same parser and commands
// (session.go); a write that waits for the disk (a durable level) runs on
// the connection's engine.Pipeline either way, sharing group commits with
// the connection's other writes, and answers keep the order of the
// commands.
package memcache
