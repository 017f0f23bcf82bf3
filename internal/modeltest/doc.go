// Package modeltest holds model-based tests that drive the engine, the views
// service and the expiry pager together with random operations and check
// every observable result against a plain Go model of the documents. After
// every step it also checks exact answers (expired=exclude: map rows,
// total_rows, key ranges, keys, group levels, _sum, _count, _stats and a
// JavaScript reduce) against a recomputation over the documents the model
// has live at that instant.
//
// The run also drives the collection expiry settings: each run picks a
// bucket maxTTL (sometimes), TTL settings for _default._default (the only
// collection views map, so the view checks meet the TTL rules there) and a
// second collection with settings and a maxTTL of its own. Writes carry a
// top-level "ttl" field (none, -1, n > 0, or an invalid one a collection
// with a defaultTTL must refuse, changing nothing) and sometimes an explicit
// expiry; reads through Get slide expirations on collections with idleTTL
// or maxLifetime; UpdateCollection changes the settings and re-evaluates the
// documents. The expiration the model expects is its own reading of the
// documented rules (ttlmodel_test.go), not the engine's code; every
// document's value, expiration, pinned state, meta.ts and meta.created, the
// sliding-extension count and the re-evaluation count are compared with it.
//
// TestModelEngineAndViews is seeded at random; the seed is printed when it
// fails and can be given back with -modeltest.seed (or MAYFLY_MODELTEST_SEED)
// to replay the same run. -modeltest.steps (or MAYFLY_MODELTEST_STEPS) sets
// the number of steps for longer runs.
package modeltest
