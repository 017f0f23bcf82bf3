package kv

import (
	"context"
	"slices"
	"strconv"

	"github.com/couchbase/gocbcore/v10/memd"

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
		lines = cbstats.Warmup(c.bucket.WarmupStats())
	default:
		c.fail(pkt, memd.StatusKeyNotFound, "no statistics group "+strconv.Quote(group))
		return
	}
	for _, l := range lines {
		c.reply(pkt, memd.StatusSuccess, nil, []byte(l[0]), []byte(l[1]), 0, 0)
	}
	c.reply(pkt, memd.StatusSuccess, nil, nil, nil, 0, 0)
}
