package pager

import (
	"math"
	"testing"
	"time"
)

func utc(day, h, m, s int) int64 { return time.Date(2024, 3, day, h, m, s, 0, time.UTC).Unix() }

func TestNextAtHour(t *testing.T) {
	for _, c := range []struct {
		now  int64
		hour int
		want int64
	}{
		{utc(5, 5, 30, 0), 7, utc(5, 7, 0, 0)},
		{utc(5, 7, 0, 0), 7, utc(5, 7, 0, 0)}, // exactly on it: now
		{utc(5, 7, 0, 1), 7, utc(6, 7, 0, 0)},
		{utc(5, 23, 59, 59), 0, utc(6, 0, 0, 0)},
		{utc(5, 0, 0, 0), 23, utc(5, 23, 0, 0)},
		{-3600, 0, 0},           // 1969-12-31 23:00 → 1970-01-01 00:00
		{-86400 - 1, 0, -86400}, // floor, not truncation, before 1970
	} {
		if got := nextAtHour(c.now, c.hour); got != c.want {
			t.Errorf("nextAtHour(%s, %d) = %s, want %s", time.Unix(c.now, 0).UTC(), c.hour, time.Unix(got, 0).UTC(), time.Unix(c.want, 0).UTC())
		}
	}
}

func TestRescheduled(t *testing.T) {
	now := utc(5, 5, 30, 0)
	for _, c := range []struct {
		name     string
		next     int64
		old, new schedule
		want     int64
	}{
		{"lower stime", now + 3000, schedule{3600, -1}, schedule{10, -1}, now + 10},
		{"raise stime keeps earlier run", now + 5, schedule{10, -1}, schedule{3600, -1}, now + 5},
		{"disable", now + 5, schedule{10, -1}, schedule{0, -1}, 0},
		{"enable", 0, schedule{0, -1}, schedule{60, -1}, now + 60},
		{"enable with hour", 0, schedule{0, 7}, schedule{60, 7}, utc(5, 7, 0, 0)},
		{"pin hour later", now + 60, schedule{3600, -1}, schedule{3600, 7}, utc(5, 7, 0, 0)},
		{"pin hour tomorrow", now + 60, schedule{3600, -1}, schedule{3600, 5}, utc(6, 5, 0, 0)},
		{"unpin hour", utc(6, 5, 0, 0), schedule{3600, 5}, schedule{3600, -1}, now + 3600},
		{"same hour, lower stime", utc(5, 7, 0, 0), schedule{3600, 7}, schedule{60, 7}, now + 60},
		{"huge stime", now + 5, schedule{10, -1}, schedule{math.MaxInt64, -1}, now + 5},
	} {
		if got := rescheduled(now, c.next, c.old, c.new); got != c.want {
			t.Errorf("%s: got now%+d, want now%+d", c.name, got-now, c.want-now)
		}
	}
}

func TestAfterRun(t *testing.T) {
	for _, c := range []struct {
		due, now, stime, want int64
	}{
		{100, 100, 10, 110},
		{100, 101, 10, 110}, // a late poll keeps the cadence
		{100, 500, 10, 510}, // a clock jump: one catch-up run, then stime
		{100, 100, 0, 0},
		{100, 100, math.MaxInt64, math.MaxInt64},
	} {
		if got := afterRun(c.due, c.now, c.stime); got != c.want {
			t.Errorf("afterRun(%d, %d, %d) = %d, want %d", c.due, c.now, c.stime, got, c.want)
		}
	}
	if got := firstRun(100, schedule{math.MaxInt64, -1}); got != math.MaxInt64 {
		t.Errorf("firstRun with huge stime = %d", got)
	}
}
