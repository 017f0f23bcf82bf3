package pager

import "math"

// This file holds the pure schedule arithmetic. Every input time is Unix
// seconds read from the engine clock; a next-run time of 0 means disabled.

const secondsPerDay = 24 * 60 * 60

// schedule is what a bucket's pager timing is computed from: its
// exp_pager_stime (seconds, 0 = disabled) and exp_pager_initial_run_time
// (UTC hour 0..23, or -1 for none).
type schedule struct {
	stime int64
	hour  int
}

// addSat returns a+b for b ≥ 0, saturating instead of overflowing, so a huge
// exp_pager_stime means "practically never" rather than a time in the past.
func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// nextAtHour returns the first instant at or after now that is hour:00:00 UTC.
// At exactly that instant it returns now.
func nextAtHour(now int64, hour int) int64 {
	day := now / secondsPerDay
	if now%secondsPerDay < 0 {
		day-- // floor for times before 1970
	}
	t := day*secondsPerDay + int64(hour)*3600
	if t < now {
		t += secondsPerDay
	}
	return t
}

// firstRun returns when the pager of a bucket first seen at now runs first:
// never when disabled, at the next occurrence of the initial-run hour when
// one is set, else one stime after now.
func firstRun(now int64, s schedule) int64 {
	switch {
	case s.stime <= 0:
		return 0
	case s.hour >= 0:
		return nextAtHour(now, s.hour)
	default:
		return addSat(now, s.stime)
	}
}

// rescheduled returns the next run after the settings change from old to new
// at now, when the next run was next:
//   - new stime 0 disables the pager (0);
//   - enabling a disabled pager schedules it as a bucket first seen now;
//   - setting a different initial-run hour pins the next run to that hour's
//     next occurrence, as Couchbase does, even when that is later;
//   - otherwise the timer only moves earlier (rosmar's rule): the next run is
//     the earlier of the old one and now+stime. Lowering 3600 to 10 runs the
//     pager 10 s from now; raising 10 to 3600 keeps the run already due soon
//     and spaces later ones by 3600.
func rescheduled(now, next int64, old, new schedule) int64 {
	switch {
	case new.stime <= 0:
		return 0
	case next == 0 || old.stime <= 0:
		return firstRun(now, new)
	case new.hour >= 0 && new.hour != old.hour:
		return nextAtHour(now, new.hour)
	default:
		return min(next, addSat(now, new.stime))
	}
}

// afterRun returns the run after one that was due at due and found at now:
// due+stime, keeping the cadence (and an initial-run hour) steady however
// late the poll came, unless that is already past, in which case now+stime,
// so a clock that jumped far ahead gives one catch-up run, not a burst.
func afterRun(due, now, stime int64) int64 {
	if stime <= 0 {
		return 0
	}
	next := addSat(due, stime)
	if next <= now {
		next = addSat(now, stime)
	}
	return next
}
