// Package feed runs the consumers of a bucket's change feed: the view
// indexes, the search indexes, and whatever follows the feed next.
//
// A Consumer owns everything a consumer does with the feed that is not about
// what it keeps: registering with the bucket (engine.Consumer), checking its
// position against the bucket's history when it starts and resetting its
// sink when the bucket no longer holds that position (a rollback), while
// it runs rewinding the partitions a new history went back in (a
// partition's copy dropped: their rows forgotten, read again from 0),
// following the feed as it moves (or only when asked), catching up to a
// target for a query that wants to see every write it saw (stale=false,
// at_plus), a two-stage pipeline in which one goroutine reads and prepares
// the next batch while another applies the previous one, acknowledging to
// the bucket only positions the sink holds durably (so the metadata purge
// never removes a tombstone a consumer could still need), and the progress
// of a build (backlog, rate, ETA, the started and ended log lines).
//
// What a consumer keeps is its Sink: its position, how a batch of changes is
// prepared, how a prepared batch is applied with the position it reaches,
// how a partition's share is forgotten (Rewind), and how everything is
// discarded. A Registry gives a service
// (engine.BucketService) one Set of running consumers per bucket, attached
// and retired with the bucket's life.
//
// Dependencies: feed imports engine; views and search import feed.
package feed
