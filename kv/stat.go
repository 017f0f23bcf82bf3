package kv

import (
	"context"
	"slices"
	"strconv"

	"github.com/couchbase/gocbcore/v10/memd"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/internal/cbstats"
)

// stat runs STAT: the selected bucket's statistics of the group its key
// names, under the cbstats names `mayfly stats` prints (package cbstats),
// one answer per statistic in name order, then an empty answer that ends
// the list. The groups are "" (every statistic), "memory" and "warmup"
// (the bucket's warm-up as it is: a bucket is served while it warms up);
// any other is KEY_ENOENT, as memcached answers a group it does not know.
func (c *conn) stat(_ context.Context, pkt *memd.Packet) {
	var lines [][2]string
	switch group := string(pkt.Key); group {
	case "", "memory":
		all := cbstats.Bucket(c.bucket, c.s.opts.PagerStats)
		names := cbstats.Memory
		if group == "" {
			names = make([]string, 0, len(all))
			for n := range all {
				names = append(names, n)
			}
			slices.Sort(names)
		}
		for _, n := range names {
			if v, ok := all[n]; ok {
				lines = append(lines, [2]string{n, strconv.FormatInt(v, 10)})
			}
		}
	case "warmup":
		lines = warmupLines(c.bucket.WarmupStats())
	default:
		c.fail(pkt, memd.StatusKeyNotFound, "no statistics group "+strconv.Quote(group))
		return
	}
	for _, l := range lines {
		c.reply(pkt, memd.StatusSuccess, nil, []byte(l[0]), []byte(l[1]), 0, 0)
	}
	c.reply(pkt, memd.StatusSuccess, nil, nil, nil, 0, 0)
}

// warmupLines are the lines of STAT warmup, Couchbase's group (cbstats
// warmup), as the memcached port's "stats warmup" gives them.
func warmupLines(w engine.WarmupStats) [][2]string {
	thread, est := "complete", "unknown"
	if w.Running {
		thread = "running"
	}
	if w.EstimatedKeyCount >= 0 {
		est = strconv.FormatInt(w.EstimatedKeyCount, 10)
	}
	return [][2]string{
		{"ep_warmup", "enabled"},
		{"ep_warmup_thread", thread},
		{"ep_warmup_state", w.State},
		{"ep_warmup_key_count", strconv.FormatInt(w.KeyCount, 10)},
		{"ep_warmup_value_count", strconv.FormatInt(w.ValueCount, 10)},
		{"ep_warmup_time", strconv.FormatInt(w.Time, 10)},
		{"ep_warmup_estimated_key_count", est},
		{"ep_warmup_estimated_value_count", est},
	}
}
