package memcache

import (
	"regexp"
	"testing"
)

// "stats" lists the process's CPU time as memcached 1.6 does, rusage_user
// and rusage_system in seconds with six decimals ("0.123456"): the CPU
// panels of memcached dashboards read them (memcached_exporter's
// memcached_process_user_cpu_seconds_total and _system_, memcstat, the
// Datadog and collectd memcached checks). Mayfly has a process and its CPU
// time, unlike the slab and hash structures whose gauges it leaves out; a
// review found both lines missing.
func TestStatsReportsProcessCPUTime(t *testing.T) {
	f := newFixture(t, nil)
	c := f.dial(t)
	st := c.stats()
	seconds := regexp.MustCompile(`^[0-9]+\.[0-9]{6}$`)
	for _, k := range []string{"rusage_user", "rusage_system"} {
		v, ok := st[k]
		if !ok {
			t.Errorf("stat %s missing", k)
			continue
		}
		if !seconds.MatchString(v) {
			t.Errorf("stat %s = %q, want seconds with six decimals, as memcached prints it", k, v)
		}
	}
}
