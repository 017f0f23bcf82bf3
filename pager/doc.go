// Package pager runs Mayfly's expiry pager and metadata purger: one schedule
// per bucket, managed by a Manager over an engine.Engine.
//
// # Basics
//
//	m := pager.New(eng, nil)
//	m.Start()
//	defer m.Close(ctx)
//	s, err := m.SetSettings(ctx, "default", &stime, nil) // reschedules at once
//	r, err := m.RunNow(ctx, "default")                   // runExpiryPager
//
// # Schedule
//
// Every decision reads the engine clock (whole Unix seconds), never the wall
// clock: the background loop started by Start only polls, calling Tick every
// Options.PollInterval, and Tick does what is due at the clock's now. Tests
// move an engine.FakeClock and call Tick themselves.
//
// A bucket runs every exp_pager_stime seconds; 0 disables it. Its first run
// is exp_pager_stime after the Manager first sees the bucket (at New, or the
// first tick after the bucket is created), or, when exp_pager_initial_run_time
// is an hour 0..23, at that hour's next occurrence (UTC; now if the clock is
// exactly on it). After a scheduled run due at T, the next is due at
// T+exp_pager_stime, keeping the cadence (and the pinned hour) however late
// the poll came; if that too is already past, at now+exp_pager_stime, so a
// clock jump gives one catch-up run rather than a burst. A run from RunNow
// makes the next one due exp_pager_stime after it.
//
// A settings change (SetSettings, or a bucket edit seen on the next tick)
// reschedules at once. The timer only moves earlier (rosmar's rule): the next
// run becomes min(next run, now+exp_pager_stime), so lowering 3600 to 10 runs
// the pager 10 s later, and raising it keeps a run already due soon. Two
// exceptions: a new initial-run hour pins the next run to that hour, as in
// Couchbase, and enabling a disabled pager schedules it as for a new bucket.
//
// # Runs
//
// A run calls engine.Bucket.ExpireBatch with Options.BatchSize until nothing
// expired is left; each batch is its own short engine work, so readers and
// writers wait at most for one document's critical section. Its cost follows
// the number of expired documents, not the bucket size. A completed run is
// counted with Bucket.CountPagerRun (ep_num_expiry_pager_runs); the purged
// documents are counted by the engine (ep_expired_pager). One run or purge
// works on a bucket at a time; buckets are visited one after another.
//
// # Metadata purge
//
// On the same loop, each bucket gets a metadata purge pass when first seen
// and then every Options.MetadataPurgePeriod seconds of engine-clock time
// (default one hour), independent of the pager's schedule, so it also runs
// when the pager is disabled. A pass removes the tombstones older than the
// bucket's purgeInterval (days) that every change-feed consumer has consumed
// (engine.Bucket.PurgeTombstones; counted as ep_meta_data_purged). A tombstone
// therefore goes at most MetadataPurgePeriod after it reaches that age.
package pager
