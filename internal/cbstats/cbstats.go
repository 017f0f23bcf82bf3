// Package cbstats names a bucket's statistics as Couchbase's cbstats does.
// The HTTP API (GET .../buckets/{bucket}/stats, which `mayfly stats`
// prints), the binary KV port's STAT and the memcached port's stats take
// them from here, so they never disagree.
package cbstats

import (
	"strconv"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/pager"
)

// PagerStats is what the expiry pager reports of a bucket;
// pager.Manager.Stats is one.
type PagerStats func(bucket string) (pager.Stats, error)

// Bucket returns b's engine statistics and settings under their cbstats
// names, with the expiry pager's when ps is not nil and knows the bucket.
func Bucket(b *engine.Bucket, ps PagerStats) map[string]int64 {
	st := b.Stats()
	set := b.Settings()
	out := map[string]int64{
		"curr_items":                    st.CurrItems,
		"ep_expired_access":             st.ExpiredAccess,
		"ep_expired_pager":              st.ExpiredPager,
		"ep_expired":                    st.Expired,
		"ep_num_expiry_pager_runs":      st.PagerRuns,
		"ep_exp_pager_stime":            set.ExpPagerStime,
		"ep_exp_pager_initial_run_time": int64(set.ExpPagerInitialRunTime),
		"ep_tombstones":                 st.Tombstones,
		"ep_meta_data_purged":           st.MetaDataPurged,
		"ep_queue_size":                 st.QueueSize,
		"ep_flusher_todo":               st.FlusherTodo,
		"ep_commit_num":                 st.CommitNum,
		"ep_commit_time":                st.CommitTimeMS,
		"ep_commit_time_total":          st.CommitTimeTotalMS,
		"ep_item_commit_failed":         st.CommitFailed,
		"ep_storage_failed":             Bool(st.StorageError != ""),
		"ep_items_with_expiry":          st.WithExpiry,
		"ep_expired_unpurged":           st.ExpiredUnpurged,
		"ep_max_ttl":                    set.MaxTTL,
		"ep_sliding_extends":            st.SlidingExtends,
		"mem_used":                      st.MemUsed,
		"ep_kv_size":                    st.KVSize,
		"ep_mem_used_secondary":         st.StorageMemUsed,
		"ep_mem_high_wat":               st.MemHighWat,
		"ep_mem_low_wat":                st.MemLowWat,
		"ep_max_size":                   set.RAMQuotaMB << 20,
		"ep_num_value_ejects":           st.NumValueEjects,
		"ep_bg_fetched":                 st.BgFetched,
		"ep_num_non_resident":           st.NonResident,
		"vb_active_perc_mem_resident":   st.ResidentPct,
		"evictions":                     st.Evictions,
		"ep_tmp_oom_errors":             st.TmpOOMErrors,
		// The warm-up (cbstats warmup); its state and ep_warmup_thread are
		// words, on the memcached port's "stats warmup" and in the
		// bucket's nodes[].status ("warmup" while it runs).
		"ep_warmup_running":             Bool(st.Warmup.Running),
		"ep_warmup_key_count":           st.Warmup.KeyCount,
		"ep_warmup_value_count":         st.Warmup.ValueCount,
		"ep_warmup_time":                st.Warmup.Time,
		"ep_warmup_estimated_key_count": st.Warmup.EstimatedKeyCount,
		// The Bloom filters of the keys on disk: the vb_active_ ones sum
		// cbstats' vb_N:bloom_filter_key_count and _size over the
		// partitions; ep_bfilter_negatives (reads of keys not in memory
		// the filters answered without a disk read) is Mayfly's own.
		"ep_bfilter_enabled":               Bool(st.Bloom.Enabled),
		"vb_active_bloom_filter_key_count": st.Bloom.Keys,
		"vb_active_bloom_filter_size":      st.Bloom.Size,
		"ep_bfilter_negatives":             st.Bloom.Negatives,
		"ep_bg_meta_fetched":               st.Bloom.MetaFetched,
	}
	if ps != nil {
		if p, err := ps(b.Name()); err == nil {
			out["ep_pager_last_run_duration_ms"] = p.LastRunDurationMS
			out["ep_expiry_pager_next_run"] = p.NextRun
		}
	}
	return out
}

// Memory are the names of the memory group ("stats memory" in cbstats):
// the memory owner's account of the bucket.
var Memory = []string{"mem_used", "ep_kv_size", "ep_mem_used_secondary", "ep_mem_high_wat", "ep_mem_low_wat", "ep_max_size", "ep_num_value_ejects", "ep_bg_fetched", "ep_num_non_resident", "vb_active_perc_mem_resident", "evictions", "ep_tmp_oom_errors"}

// Bool is a yes/no statistic: 1 or 0.
func Bool(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// Warmup is Couchbase's warmup group (cbstats warmup) of w, in the order
// the memcached port's "stats warmup" and the KV port's STAT warmup give
// it: the thread and the state as words, keys and values loaded (they load
// together), the time in µs, and the estimate ("unknown" until made).
func Warmup(w engine.WarmupStats) [][2]string {
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
