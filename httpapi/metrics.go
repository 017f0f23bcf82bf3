package httpapi

import (
	"context"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/views"
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
	{"mayfly_sliding_extends_total", "Expirations moved by sliding expiry (idleTTL) on reads and writes.", "ep_sliding_extends", prometheus.CounterValue, nil},
	{"mayfly_expiry_pager_runs_total", "Expiry pager runs.", "ep_num_expiry_pager_runs", prometheus.CounterValue, nil},
	{"mayfly_exp_pager_stime_seconds", "Seconds between expiry pager runs (0: disabled).", "ep_exp_pager_stime", prometheus.GaugeValue, nil},
	{"mayfly_pager_last_run_duration_milliseconds", "Duration of the last expiry pager run.", "ep_pager_last_run_duration_ms", prometheus.GaugeValue, nil},
	{"mayfly_tombstones", "Tombstones not yet purged.", "ep_tombstones", prometheus.GaugeValue, nil},
	{"mayfly_meta_data_purged_total", "Tombstones removed by the metadata purger.", "ep_meta_data_purged", prometheus.CounterValue, nil},
	{"mayfly_queue_size", "Mutations queued for disk, not yet taken by a commit.", "ep_queue_size", prometheus.GaugeValue, nil},
	{"mayfly_flusher_todo", "Mutations the commit in flight is writing.", "ep_flusher_todo", prometheus.GaugeValue, nil},
	{"mayfly_commits_total", "Commits to disk made.", "ep_commit_num", prometheus.CounterValue, nil},
	{"mayfly_commit_time_milliseconds", "Duration of the last commit to disk.", "ep_commit_time", prometheus.GaugeValue, nil},
	{"mayfly_commit_time_milliseconds_total", "Duration of every commit to disk, added up.", "ep_commit_time_total", prometheus.CounterValue, nil},
	{"mayfly_commit_failed_total", "Commits to disk that failed.", "ep_item_commit_failed", prometheus.CounterValue, nil},
	{"mayfly_storage_failed", "1 while the bucket refuses writes because its disk failed or is full.", "ep_storage_failed", prometheus.GaugeValue, nil},
	{"mayfly_expired_all_total", "Documents expired, however they were found.", "ep_expired", prometheus.CounterValue, nil},
	{"mayfly_exp_pager_initial_run_time", "UTC hour of the expiry pager's first run (-1: none).", "ep_exp_pager_initial_run_time", prometheus.GaugeValue, nil},
	{"mayfly_items_with_expiry", "Live documents with an expiration.", "ep_items_with_expiry", prometheus.GaugeValue, nil},
	{"mayfly_max_ttl_seconds", "The bucket's maximum TTL (0: none).", "ep_max_ttl", prometheus.GaugeValue, nil},
	{"mayfly_mem_used_bytes", "Memory the bucket's documents hold (keys, metadata, values and per-item overhead), by the bucket's own account.", "mem_used", prometheus.GaugeValue, nil},
	{"mayfly_kv_size_bytes", "Bytes of the documents' keys, metadata and values held in memory.", "ep_kv_size", prometheus.GaugeValue, nil},
	{"mayfly_storage_mem_used_bytes", "Memory the bucket's store holds beside mem_used: a pebble store's block cache and memtables (at most 64 MiB a bucket).", "ep_mem_used_secondary", prometheus.GaugeValue, nil},
	{"mayfly_mem_high_wat_bytes", "The high-water mark: past it, a bucket that evicts starts evicting.", "ep_mem_high_wat", prometheus.GaugeValue, nil},
	{"mayfly_mem_low_wat_bytes", "The low-water mark: eviction stops at it.", "ep_mem_low_wat", prometheus.GaugeValue, nil},
	{"mayfly_ram_quota_bytes", "The bucket's memory quota.", "ep_max_size", prometheus.GaugeValue, nil},
	{"mayfly_value_ejects_total", "Values ejected from memory by a couchbase bucket's value eviction.", "ep_num_value_ejects", prometheus.CounterValue, nil},
	{"mayfly_bg_fetched_total", "Documents read back from disk with their values: ejected values, and under fullEviction items out of memory whole.", "ep_bg_fetched", prometheus.CounterValue, nil},
	{"mayfly_non_resident_items", "Live documents whose value is not in memory.", "ep_num_non_resident", prometheus.GaugeValue, nil},
	{"mayfly_resident_items_ratio_percent", "Percentage of live documents whose value is in memory.", "vb_active_perc_mem_resident", prometheus.GaugeValue, nil},
	{"mayfly_evictions_total", "Items evicted to keep the memory quota.", "evictions", prometheus.CounterValue, nil},
	{"mayfly_tmp_oom_errors_total", "Writes refused because the bucket was at its memory quota.", "ep_tmp_oom_errors", prometheus.CounterValue, nil},
	{"mayfly_warmup_running", "1 while the bucket loads its documents after a restart (its warm-up), 0 once done.", "ep_warmup_running", prometheus.GaugeValue, nil},
	{"mayfly_warmup_keys_loaded", "Documents the bucket's warm-up has loaded.", "ep_warmup_key_count", prometheus.GaugeValue, nil},
	{"mayfly_warmup_values_loaded", "Values the bucket's warm-up has loaded: one with each key, except the values it leaves on disk (past a valueOnly bucket's low-water mark; a fullEviction bucket's, but for the items read meanwhile).", "ep_warmup_value_count", prometheus.GaugeValue, nil},
	{"mayfly_warmup_estimated_keys", "Documents the bucket's store holds by its estimate at warm-up (-1: unknown).", "ep_warmup_estimated_key_count", prometheus.GaugeValue, nil},
	{"mayfly_warmup_time_microseconds", "How long the bucket's warm-up took, or has taken so far.", "ep_warmup_time", prometheus.GaugeValue, nil},
	{"mayfly_bloom_filter_enabled", "1 while the bucket keeps Bloom filters of the keys on disk (a couchbase bucket's warm-up; a fullEviction bucket always), 0 otherwise.", "ep_bfilter_enabled", prometheus.GaugeValue, nil},
	{"mayfly_bloom_filter_keys", "Keys the bucket's Bloom filters hold (the store's at warm-up, every key written since).", "vb_active_bloom_filter_key_count", prometheus.GaugeValue, nil},
	{"mayfly_bloom_filter_bytes", "Memory the bucket's Bloom filters take.", "vb_active_bloom_filter_size", prometheus.GaugeValue, nil},
	{"mayfly_bloom_filter_negatives_total", "Reads of keys not in memory that the Bloom filters answered without reading the disk.", "ep_bfilter_negatives", prometheus.CounterValue, nil},
	{"mayfly_bg_meta_fetched_total", "Keys whose metadata was read from disk because memory did not hold them.", "ep_bg_meta_fetched", prometheus.CounterValue, nil},
	{"mayfly_expiry_pager_next_run_timestamp_seconds", "When the expiry pager runs next (engine clock, Unix seconds; 0: disabled).", "ep_expiry_pager_next_run", prometheus.GaugeValue, nil},
}

// The view metrics: each design document's index figures (views.Info),
// labelled bucket and ddoc, and each view's, labelled view too.
var (
	viewPending = prometheus.NewDesc("mayfly_view_pending_changes", "Changes the design document's index has not seen yet (0: built and up to date).", []string{"bucket", "ddoc"}, nil)
	viewMapped  = prometheus.NewDesc("mayfly_view_documents_mapped_total", "Documents run through the design document's map functions.", []string{"bucket", "ddoc"}, nil)
	viewSeq     = prometheus.NewDesc("mayfly_view_update_seq", "Sum of the sequence numbers the design document's index has reached.", []string{"bucket", "ddoc"}, nil)
	viewRows    = prometheus.NewDesc("mayfly_view_rows", "Rows in the view's index.", []string{"bucket", "ddoc", "view"}, nil)
	viewErrors  = prometheus.NewDesc("mayfly_view_map_errors_total", "Failures of the view's map function.", []string{"bucket", "ddoc", "view"}, nil)
)

// ftsMetrics are the full-text index stats (searchStatValues),
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
	for _, d := range []*prometheus.Desc{viewPending, viewMapped, viewSeq, viewRows, viewErrors} {
		c.descs[d.String()] = d
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
	ctx := context.Background()
	for _, b := range c.s.eng.Buckets() {
		c.collectViews(ctx, b.Name(), ch)
		st, idx, err := c.s.statsOf(ctx, b.Name())
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

// collectViews sends the figures of a bucket's design documents.
func (c *statsCollector) collectViews(ctx context.Context, bucket string, ch chan<- prometheus.Metric) {
	if c.s.views == nil {
		return
	}
	ds, err := c.s.views.DesignDocs(ctx, bucket)
	if err != nil {
		return // a memcached bucket, or one not ready
	}
	for _, d := range ds {
		inf, err := c.s.views.Info(ctx, bucket, strings.TrimPrefix(d.ID, views.DesignDocPrefix))
		if err != nil {
			continue // deleted meanwhile
		}
		ddoc := labelUTF8(inf.Name)
		ch <- prometheus.MustNewConstMetric(viewPending, prometheus.GaugeValue, float64(inf.Pending), bucket, ddoc)
		ch <- prometheus.MustNewConstMetric(viewMapped, prometheus.CounterValue, float64(inf.Mapped), bucket, ddoc)
		ch <- prometheus.MustNewConstMetric(viewSeq, prometheus.GaugeValue, float64(inf.Seqs), bucket, ddoc)
		for name, v := range inf.Views {
			ch <- prometheus.MustNewConstMetric(viewRows, prometheus.GaugeValue, float64(v.TotalRows), bucket, ddoc, name)
			ch <- prometheus.MustNewConstMetric(viewErrors, prometheus.CounterValue, float64(v.MapErrors), bucket, ddoc, name)
		}
	}
}

// labelUTF8 returns s fit for a Prometheus label value, which must be UTF-8
// (a collector that sends another fails the whole scrape): each byte that
// is not part of valid UTF-8 becomes U+FFFD, as encoding/json makes of a
// view's name (a key of its design document's body) and as the JSON answers
// show such a design document's id. PUT refuses such a design document name
// (views.ErrNameNotUTF8); one stored before keeps its metrics this way.
func labelUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		if r == utf8.RuneError && n == 1 {
			b.WriteString("\ufffd")
		} else {
			b.WriteString(s[:n])
		}
		s = s[n:]
	}
	return b.String()
}

// httpMetrics count the requests the API answers and time them, by route
// (mux's path template, so that a route is one series whatever its
// variables), method and status.
type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newHTTPMetrics() *httpMetrics {
	return &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mayfly_http_requests_total",
			Help: "HTTP requests answered, by route (path template; \"none\" when no route matched or the request was refused first), method and status code."},
			[]string{"route", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "mayfly_http_request_duration_seconds",
			Help: "Time to answer HTTP requests, by route and method.", Buckets: prometheus.DefBuckets},
			[]string{"route", "method"}),
	}
}

// routeKey is the context key of a request's *routeLabel.
type routeKey struct{}

// routeLabel is what the front door learns of a request as it goes: the
// matched route's template, filled in by markRoute (or viewRouter) once the
// route is known, and the authenticated caller, filled in by guard. It is
// the request's context too: its parent's, with itself as the value of
// routeKey. Each context value costs a copy of the request (WithContext)
// and a 100-row view answer's garbage was mostly such plumbing, so a
// request carries one, set once.
type routeLabel struct {
	context.Context
	template  string
	principal *auth.Principal
	// viewVars are a view query's bucket, design document and view, as
	// sent, when viewRouted: viewRouter matched the request, not mux.
	viewVars   [3]string
	viewRouted bool
}

// newRouteLabel returns r with a routeLabel of its own as its context.
func newRouteLabel(r *http.Request) (*http.Request, *routeLabel) {
	rl := &routeLabel{Context: r.Context(), template: "none"}
	return r.WithContext(rl), rl
}

// Value is the parent context's, but for routeKey: the label itself.
func (rl *routeLabel) Value(key any) any {
	if key == (routeKey{}) {
		return rl
	}
	return rl.Context.Value(key)
}

// instrumented is what instrument keeps of a request: its status and its
// label, in one allocation.
type instrumented struct {
	rec codeRecorder
	rl  routeLabel
}

// instrument counts and times every request next answers.
func (m *httpMetrics) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now() // wall clock: request latency
		st := &instrumented{rec: codeRecorder{ResponseWriter: w, status: http.StatusOK}, rl: routeLabel{Context: r.Context(), template: "none"}}
		next.ServeHTTP(&st.rec, r.WithContext(&st.rl))
		method := methodLabel(r.Method)
		m.requests.WithLabelValues(st.rl.template, method, strconv.Itoa(st.rec.status)).Inc()
		m.duration.WithLabelValues(st.rl.template, method).Observe(time.Since(start).Seconds())
	})
}

// markRoute is mux middleware: it notes the matched route's template for
// instrument.
func markRoute(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rl, ok := r.Context().Value(routeKey{}).(*routeLabel); ok {
			if cr := mux.CurrentRoute(r); cr != nil {
				if t, err := cr.GetPathTemplate(); err == nil {
					rl.template = t
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// methodLabel keeps the method label to the methods the API knows.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodOptions:
		return m
	}
	return "other"
}

// codeRecorder notes the status a handler answers.
type codeRecorder struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (r *codeRecorder) WriteHeader(status int) {
	if !r.wrote {
		r.status, r.wrote = status, true
	}
	r.ResponseWriter.WriteHeader(status)
}

func (r *codeRecorder) Write(p []byte) (int, error) {
	r.wrote = true
	return r.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (r *codeRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// Series names one exported series: a metric and its labels other than
// bucket (and index, for a full-text index's).
type Series struct {
	Name   string
	Labels prometheus.Labels
}

// metricOf returns the series that exports the bucket statistic stat.
func metricOf(stat string) (Series, bool) {
	for _, m := range metricList {
		if m.stat == stat {
			return Series{m.name, m.labels}, true
		}
	}
	var best Series
	if rest, ok := strings.CutPrefix(stat, "fts_"); ok {
		// The longest stat name that ends it: fts_i_total_queries_error
		// is index i's total_queries_error.
		n := 0
		for s := range ftsMetrics {
			if index, ok := strings.CutSuffix(rest, "_"+s); ok && index != "" && len(s) > n {
				n, best = len(s), Series{ftsMetricName(s), prometheus.Labels{"index": index}}
			}
		}
		return best, n > 0
	}
	return best, false
}
