// Package modeltest holds model-based tests that drive the engine, the views
// service and the expiry pager together with random operations and check
// every observable result against a plain Go model of the documents. After
// every step it also checks exact answers (expired=exclude: map rows,
// total_rows, key ranges, keys, group levels, _sum, _count, _stats and a
// JavaScript reduce) against a recomputation over the documents the model
// has live at that instant.
//
// TestModelEngineAndViews is seeded at random; the seed is printed when it
// fails and can be given back with -modeltest.seed (or MAYFLY_MODELTEST_SEED)
// to replay the same run. -modeltest.steps (or MAYFLY_MODELTEST_STEPS) sets
// the number of steps for longer runs.
package modeltest
