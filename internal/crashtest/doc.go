// Package crashtest is Mayfly's kill -9 test. It holds no library code: the
// harness lives in its test files and drives the real server only through its
// public surface, the `mayfly serve` binary over HTTP, so it keeps working
// whatever happens inside the engine and the views.
//
// TestCrash builds cmd/mayfly, then repeats rounds on one data directory:
//
//   - start (or restart) `mayfly serve` with fsync on, HTTP on a free port of
//     127.0.0.1 and the memcached port off;
//   - check every key of the key space against what the harness knows: a key
//     whose last acknowledged (2xx) operation was an upsert or a touch must
//     hold that value and expiration, one whose last acknowledged operation
//     was a delete must be 404, unless an operation on that key was in flight
//     when the process was killed (then its outcome is acceptable too), or the
//     document carried an expiry that may have passed (then 404 is acceptable);
//   - query both views of the design document with stale=false and compare
//     them with a fresh map of the documents just read: the rows (key
//     [doc.g, id], value doc.n) of every document with no near expiry must be
//     exactly there, and the _sum and _count reductions must equal the rows
//     the view returned; a query that does not answer within 30 s is a hang;
//   - search the full-text index (created over the bucket in the first
//     round, PUT /api/index/crashfts) with match_all at consistency
//     at_plus: its hits must be exactly the ids of the documents just read
//     with no near expiry (near-expiry ones may be there or not), and
//     total_hits must count them;
//   - sometimes replace the design document with an equivalent one (forcing a
//     rebuild), set the expiry pager's interval, or run a round with more
//     writers so the index's log grows past its checkpoint threshold;
//   - run concurrent writers doing upserts (some with expiries of 1–2 s or an
//     hour), deletes and touches over the key space, recording the last
//     acknowledged operation of each key and the operation in flight, while
//     side goroutines run the expiry pager, stale=false queries and a
//     design document replacement;
//   - SIGKILL the server at a random moment, a few milliseconds to about two
//     seconds into the round (three in rounds with 32 writers). In a
//     "replacement probe" round the kill waits until a design document
//     replacement and a concurrent stale=false query have answered; past
//     30 s they count as a hang, and the server is sent SIGQUIT so its log
//     holds every goroutine's stack (the failure message quotes the ones in
//     views and index).
//
// Each key belongs to one writer, so a key never has two operations in flight
// and its acknowledged history is exact. The test fails on any lost
// acknowledged write, view or search mismatch (counted as view_mismatches)
// or hang.
//
// `go test ./internal/crashtest/` runs five kills (skipped with -short);
// MAYFLY_CRASH_KILLS sets another number. For a soak, MAYFLY_SOAK=10m runs
// rounds until the duration has passed (`make soak SOAK=10m`) and prints
//
//	crash soak: kills=K acknowledged_writes_checked=W lost=L view_mismatches=M
//
// MAYFLY_CRASH_SEED fixes the random seed; MAYFLY_CRASH_KEEP=1 keeps the data
// directory and the server's log for a post-mortem.
package crashtest
