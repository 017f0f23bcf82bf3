package httpapi

import (
	"context"
	"sort"

	"github.com/prometheus/client_golang/prometheus"
)

// statsCollector exports every bucket's statistics as Prometheus metrics at
// scrape time, so nothing is counted twice.
type statsCollector struct {
	s     *server
	descs map[string]*prometheus.Desc
}

// metric describes one exported figure.
type metric struct {
	name, help, stat string
	kind             prometheus.ValueType
	labels           prometheus.Labels
}

var metricList = []metric{
	{"mayfly_expired_total", "Documents expired, by how they were found.", "ep_expired_access", prometheus.CounterValue, prometheus.Labels{"how": "access"}},
	{"mayfly_expired_total", "Documents expired, by how they were found.", "ep_expired_pager", prometheus.CounterValue, prometheus.Labels{"how": "pager"}},
	{"mayfly_curr_items", "Live documents, expired but unpurged ones included.", "curr_items", prometheus.GaugeValue, nil},
	{"mayfly_expired_unpurged", "Documents whose expiration has passed, not purged yet.", "ep_expired_unpurged", prometheus.GaugeValue, nil},
	{"mayfly_expiry_pager_runs_total", "Expiry pager runs.", "ep_num_expiry_pager_runs", prometheus.CounterValue, nil},
	{"mayfly_exp_pager_stime_seconds", "Seconds between expiry pager runs (0: disabled).", "ep_exp_pager_stime", prometheus.GaugeValue, nil},
	{"mayfly_pager_last_run_duration_milliseconds", "Duration of the last expiry pager run.", "ep_pager_last_run_duration_ms", prometheus.GaugeValue, nil},
	{"mayfly_tombstones", "Tombstones not yet purged.", "ep_tombstones", prometheus.GaugeValue, nil},
	{"mayfly_meta_data_purged_total", "Tombstones removed by the metadata purger.", "ep_meta_data_purged", prometheus.CounterValue, nil},
	{"mayfly_queue_size", "Mutations waiting for disk.", "ep_queue_size", prometheus.GaugeValue, nil},
	{"mayfly_commit_failed_total", "Commits to disk that failed.", "ep_item_commit_failed", prometheus.CounterValue, nil},
	{"mayfly_storage_failed", "1 while the bucket refuses writes because its disk failed or is full.", "ep_storage_failed", prometheus.GaugeValue, nil},
}

// ftsMetrics are the full-text index stats (SearchService.BucketIndexStats),
// exported as mayfly_fts_STAT{bucket, index}: the stat fts_INDEX_STAT of
// the bucket's statistics.
var ftsMetrics = map[string]struct {
	help string
	kind prometheus.ValueType
}{
	"doc_count":              {"Live documents the full-text index holds.", prometheus.GaugeValue},
	"num_mutations_to_index": {"Sequence numbers the full-text index is behind its bucket.", prometheus.GaugeValue},
	"num_bytes_used_disk":    {"Size of the full-text index's files in bytes (0 in memory).", prometheus.GaugeValue},
	"total_queries":          {"Queries run on the full-text index since it opened.", prometheus.CounterValue},
	"total_queries_error":    {"Queries on the full-text index that failed since it opened.", prometheus.CounterValue},
	"docs_indexed":           {"Documents the full-text index added or replaced since it opened.", prometheus.CounterValue},
	"docs_deleted":           {"Documents the full-text index removed since it opened.", prometheus.CounterValue},
	"batches":                {"Batches the full-text index wrote since it opened.", prometheus.CounterValue},
	"index_errors":           {"Documents bleve refused and batches that failed.", prometheus.CounterValue},
	"rollbacks":              {"Times the full-text index was discarded and rebuilt on opening.", prometheus.CounterValue},
}

// ftsMetricName is the metric of a full-text index stat.
func ftsMetricName(stat string) string { return "mayfly_fts_" + stat }

func newStatsCollector(s *server) *statsCollector {
	c := &statsCollector{s: s, descs: map[string]*prometheus.Desc{}}
	for _, m := range metricList {
		if _, ok := c.descs[m.name]; ok {
			continue
		}
		var labels []string
		labels = append(labels, "bucket")
		if m.labels != nil {
			for k := range m.labels {
				labels = append(labels, k)
			}
		}
		c.descs[m.name] = prometheus.NewDesc(m.name, m.help, labels, nil)
	}
	for stat, m := range ftsMetrics {
		name := ftsMetricName(stat)
		c.descs[name] = prometheus.NewDesc(name, m.help, []string{"bucket", "index"}, nil)
	}
	return c
}

// Describe sends every metric's description.
func (c *statsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect reads every bucket's statistics now.
func (c *statsCollector) Collect(ch chan<- prometheus.Metric) {
	for _, b := range c.s.eng.Buckets() {
		st, idx, err := c.s.statsOf(context.Background(), b.Name())
		if err != nil {
			continue
		}
		indexes := make([]string, 0, len(idx))
		for index := range idx {
			indexes = append(indexes, index)
		}
		sort.Strings(indexes)
		for _, index := range indexes {
			for stat, v := range idx[index] {
				m, ok := ftsMetrics[stat]
				if !ok {
					continue
				}
				ch <- prometheus.MustNewConstMetric(c.descs[ftsMetricName(stat)], m.kind, float64(v), b.Name(), index)
			}
		}
		for _, m := range metricList {
			v, ok := st[m.stat]
			if !ok {
				continue
			}
			lv := []string{b.Name()}
			for _, val := range m.labels {
				lv = append(lv, val)
			}
			ch <- prometheus.MustNewConstMetric(c.descs[m.name], m.kind, float64(v), lv...)
		}
	}
}
