package memcache

import (
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/internal/cbstats"
)

// Stats are a Server's cumulative counters, named after memcached's stats.
type Stats struct {
	// CurrConnections counts open client connections (curr_connections).
	CurrConnections int64
	// TotalConnections counts connections served, refused ones not
	// included, and the listeners served on, as memcached counts its
	// listening sockets (total_connections).
	TotalConnections int64
	// RejectedConnections counts connections refused over MaxConns
	// (rejected_connections).
	RejectedConnections int64
	// CmdGet counts keys asked for by get and gets (cmd_get).
	CmdGet int64
	// CmdSet counts storage commands whose data block was read (cmd_set).
	CmdSet int64
	// CmdFlush counts flush_all commands (cmd_flush).
	CmdFlush int64
	// CmdTouch counts keys touched by touch, gat and gats (cmd_touch).
	CmdTouch int64
	// GetHits and GetMisses split CmdGet (get_hits, get_misses).
	GetHits, GetMisses int64
	// GetExpired counts get misses that found the item expired (get_expired).
	GetExpired int64
	// DeleteHits and DeleteMisses count delete (delete_hits, delete_misses).
	DeleteHits, DeleteMisses int64
	// IncrHits and IncrMisses count incr (incr_hits, incr_misses).
	IncrHits, IncrMisses int64
	// DecrHits and DecrMisses count decr (decr_hits, decr_misses).
	DecrHits, DecrMisses int64
	// CasHits, CasMisses and CasBadval count cas: stored, not found, and
	// refused for a stale cas unique (cas_hits, cas_misses, cas_badval).
	CasHits, CasMisses, CasBadval int64
	// TouchHits and TouchMisses split CmdTouch (touch_hits, touch_misses).
	TouchHits, TouchMisses int64
	// StoreTooLarge counts values refused as over MaxItemSize (store_too_large).
	StoreTooLarge int64
	// TotalItems counts items stored (total_items).
	TotalItems int64
	// BytesRead and BytesWritten count network bytes (bytes_read, bytes_written).
	BytesRead, BytesWritten int64
	// IdleKicks counts connections closed by IdleTimeout or CommandTimeout
	// (idle_kicks).
	IdleKicks int64
}

// counters are the live form of Stats.
type counters struct {
	currConns, totalConns, rejectedConns                  atomic.Int64
	cmdGet, cmdSet, cmdFlush, cmdTouch                    atomic.Int64
	getHits, getMisses, getExpired                        atomic.Int64
	deleteHits, deleteMisses                              atomic.Int64
	incrHits, incrMisses, decrHits, decrMisses            atomic.Int64
	casHits, casMisses, casBadval, touchHits, touchMisses atomic.Int64
	storeTooLarge, totalItems, bytesRead, bytesWritten    atomic.Int64
	idleKicks                                             atomic.Int64
}

func (c *counters) snapshot() Stats {
	return Stats{
		CurrConnections: c.currConns.Load(), TotalConnections: c.totalConns.Load(),
		RejectedConnections: c.rejectedConns.Load(),
		CmdGet:              c.cmdGet.Load(), CmdSet: c.cmdSet.Load(), CmdFlush: c.cmdFlush.Load(),
		CmdTouch: c.cmdTouch.Load(), GetHits: c.getHits.Load(), GetMisses: c.getMisses.Load(),
		GetExpired: c.getExpired.Load(), DeleteHits: c.deleteHits.Load(), DeleteMisses: c.deleteMisses.Load(),
		IncrHits: c.incrHits.Load(), IncrMisses: c.incrMisses.Load(),
		DecrHits: c.decrHits.Load(), DecrMisses: c.decrMisses.Load(),
		CasHits: c.casHits.Load(), CasMisses: c.casMisses.Load(), CasBadval: c.casBadval.Load(),
		TouchHits: c.touchHits.Load(), TouchMisses: c.touchMisses.Load(),
		StoreTooLarge: c.storeTooLarge.Load(), TotalItems: c.totalItems.Load(),
		BytesRead: c.bytesRead.Load(), BytesWritten: c.bytesWritten.Load(),
		IdleKicks: c.idleKicks.Load(),
	}
}

// reset zeroes what memcached's "stats reset" zeroes: every cumulative
// counter, not the gauges.
func (c *counters) reset() {
	for _, a := range []*atomic.Int64{
		&c.totalConns, &c.rejectedConns, &c.cmdGet, &c.cmdSet, &c.cmdFlush, &c.cmdTouch,
		&c.getHits, &c.getMisses, &c.getExpired, &c.deleteHits, &c.deleteMisses,
		&c.incrHits, &c.incrMisses, &c.decrHits, &c.decrMisses,
		&c.casHits, &c.casMisses, &c.casBadval, &c.touchHits, &c.touchMisses,
		&c.storeTooLarge, &c.totalItems, &c.bytesRead, &c.bytesWritten, &c.idleKicks,
	} {
		a.Store(0)
	}
}

// engineBaseline is a bucket's engine counters that the port shows as
// memcached's cumulative stats (evictions, store_no_memory), as they were at
// a "stats reset": the port shows them from there, as memcached zeroes its
// own, while the bucket's (cbstats, REST, the KV port) keep counting.
type engineBaseline struct {
	bucket                 *engine.Bucket
	evictions, tmpOOMError int64
}

// resetStats is "stats reset": the port's counters zeroed, and the
// bucket's engine counters it shows taken as a baseline.
func (s *Server) resetStats() {
	s.stats.reset()
	b := s.target().bucket
	if b == nil {
		return
	}
	es := b.Stats()
	s.since.Store(&engineBaseline{bucket: b, evictions: es.Evictions, tmpOOMError: es.TmpOOMErrors})
}

// sinceReset returns the bucket's evictions and refused stores counted
// since the last "stats reset" (the whole counts when the reset was on
// another bucket: a restarted or re-created one).
func (s *Server) sinceReset(b *engine.Bucket, es engine.Stats) (evictions, noMemory int64) {
	evictions, noMemory = es.Evictions, es.TmpOOMErrors
	if base := s.since.Load(); base != nil && base.bucket == b {
		evictions = max(0, evictions-base.evictions)
		noMemory = max(0, noMemory-base.tmpOOMError)
	}
	return evictions, noMemory
}

// Stats returns the server's counters.
func (s *Server) Stats() Stats { return s.stats.snapshot() }

// stat is one "STAT name value" line.
type stat struct{ name, value string }

func i64(v int64) string { return strconv.FormatInt(v, 10) }

// generalStats are the lines of a bare "stats", in memcached's order, with
// the engine's expiry counters (cbstats names) at the end.
func (s *Server) generalStats() []stat {
	now := s.clock.Now()
	st := s.stats.snapshot()
	b := s.target().bucket
	var es engine.Stats
	if b != nil {
		es = b.Stats()
	}
	quota := s.settings().RAMQuotaMB << 20
	evictions, noMemory := s.sinceReset(b, es)
	user, system := processCPU()
	lines := []stat{
		{"pid", strconv.Itoa(os.Getpid())},
		{"uptime", i64(now - s.started)},
		{"time", i64(now)},
		{"version", s.opts.Version},
		{"pointer_size", strconv.Itoa(strconv.IntSize)},
		{"rusage_user", user},
		{"rusage_system", system},
		{"max_connections", strconv.Itoa(s.opts.MaxConns)},
		{"curr_connections", i64(st.CurrConnections)},
		{"total_connections", i64(st.TotalConnections)},
		{"rejected_connections", i64(st.RejectedConnections)},
		// memcached's connection and buffer structures: Mayfly has none.
		{"response_obj_oom", "0"},
		{"read_buf_oom", "0"},
		{"cmd_get", i64(st.CmdGet)},
		{"cmd_set", i64(st.CmdSet)},
		{"cmd_flush", i64(st.CmdFlush)},
		{"cmd_touch", i64(st.CmdTouch)},
		{"cmd_meta", "0"},
		{"get_hits", i64(st.GetHits)},
		{"get_misses", i64(st.GetMisses)},
		{"get_expired", i64(st.GetExpired)},
		{"get_flushed", "0"},
		{"delete_misses", i64(st.DeleteMisses)},
		{"delete_hits", i64(st.DeleteHits)},
		{"incr_misses", i64(st.IncrMisses)},
		{"incr_hits", i64(st.IncrHits)},
		{"decr_misses", i64(st.DecrMisses)},
		{"decr_hits", i64(st.DecrHits)},
		{"cas_misses", i64(st.CasMisses)},
		{"cas_hits", i64(st.CasHits)},
		{"cas_badval", i64(st.CasBadval)},
		{"touch_hits", i64(st.TouchHits)},
		{"touch_misses", i64(st.TouchMisses)},
		{"store_too_large", i64(st.StoreTooLarge)},
		{"store_no_memory", i64(noMemory)},
		{"auth_cmds", "0"},
		{"auth_errors", "0"},
		{"idle_kicks", i64(st.IdleKicks)},
		{"bytes_read", i64(st.BytesRead)},
		{"bytes_written", i64(st.BytesWritten)},
		{"limit_maxbytes", i64(s.settings().RAMQuotaMB << 20)},
		{"accepting_conns", "1"},
		// Mayfly never stops listening: it refuses a connection over
		// max_connections instead (rejected_connections).
		{"listen_disabled_num", "0"},
		{"time_in_listen_disabled_us", "0"},
		{"threads", strconv.Itoa(runtime.GOMAXPROCS(0))},
		{"conn_yields", "0"},
		// memcached's allocator, log watchers and thread hand-off: no such
		// mechanism in Mayfly.
		{"malloc_fails", "0"},
		{"log_worker_dropped", "0"},
		{"log_worker_written", "0"},
		{"log_watcher_skipped", "0"},
		{"log_watcher_sent", "0"},
		{"unexpected_napi_ids", "0"},
		{"round_robin_fallback", "0"},
		{"curr_items", i64(es.CurrItems)},
		{"bytes", i64(es.KVSize)},
		{"total_items", i64(st.TotalItems)},
		{"expired_unfetched", "0"},
		{"evicted_unfetched", "0"},
		{"evictions", i64(evictions)},
		{"reclaimed", "0"},
		// memcached's LRU crawler and segmented LRU: Mayfly's expiry is its
		// pager (ep_expired_pager below), and its eviction one
		// second-chance queue per bucket (evictions above).
		{"crawler_reclaimed", "0"},
		{"crawler_items_checked", "0"},
		{"lrutail_reflocked", "0"},
		{"moves_to_cold", "0"},
		{"moves_to_warm", "0"},
		{"moves_within_lru", "0"},
		{"direct_reclaims", "0"},
		{"lru_bumps_dropped", "0"},
		{"ep_expired_access", i64(es.ExpiredAccess)},
		{"ep_expired_pager", i64(es.ExpiredPager)},
		{"ep_expired", i64(es.Expired)},
		{"ep_num_expiry_pager_runs", i64(es.PagerRuns)},
		{"curr_items_tot", i64(es.CurrItems)},
		{"mem_used", i64(es.MemUsed)},
		{"ep_kv_size", i64(es.KVSize)},
		{"ep_mem_high_wat", i64(es.MemHighWat)},
		{"ep_mem_low_wat", i64(es.MemLowWat)},
		// The marks' shares of the quota, as Couchbase's fractions (0.85).
		{"ep_mem_high_wat_percent", share(es.MemHighWat, quota)},
		{"ep_mem_low_wat_percent", share(es.MemLowWat, quota)},
		{"ep_num_value_ejects", i64(es.NumValueEjects)},
		{"ep_bg_fetched", i64(es.BgFetched)},
		{"ep_num_non_resident", i64(es.NonResident)},
		{"vb_active_perc_mem_resident", i64(es.ResidentPct)},
		{"ep_tmp_oom_errors", i64(es.TmpOOMErrors)},
		{"ep_queue_size", i64(es.QueueSize)},
		{"ep_flusher_todo", i64(es.FlusherTodo)},
		{"ep_commit_num", i64(es.CommitNum)},
		{"ep_commit_time", i64(es.CommitTimeMS)},
		{"ep_commit_time_total", i64(es.CommitTimeTotalMS)},
	}
	lines = append(lines, warmupStats(es.Warmup)...)
	if s.opts.IdleTimeout <= 0 && s.opts.CommandTimeout <= 0 {
		// As memcached: idle_kicks only when a timeout is set.
		lines = slices.DeleteFunc(lines, func(l stat) bool { return l.name == "idle_kicks" })
	}
	return lines
}

// share is v's share of quota as Couchbase prints a fraction (0.85).
func share(v, quota int64) string {
	if quota <= 0 {
		return "0"
	}
	return strconv.FormatFloat(math.Round(float64(v)/float64(quota)*1e4)/1e4, 'f', -1, 64)
}

// warmupStats are the lines of "stats warmup", Couchbase's group (cbstats
// warmup), also among the general stats as Couchbase lists them: the
// bucket's warm-up after a restart (cbstats.Warmup).
func warmupStats(w engine.WarmupStats) []stat {
	var out []stat
	for _, l := range cbstats.Warmup(w) {
		out = append(out, stat{l[0], l[1]})
	}
	return out
}

// settingsStats are the lines of "stats settings": memcached's names, with
// the values that hold for this server.
func (s *Server) settingsStats() []stat {
	port, iface := s.listenAddr()
	yn := func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	}
	return []stat{
		{"maxbytes", i64(s.settings().RAMQuotaMB << 20)},
		{"maxconns", strconv.Itoa(s.opts.MaxConns)},
		{"tcpport", port},
		{"udpport", "0"},
		{"inter", iface},
		{"verbosity", strconv.FormatUint(uint64(s.verbosity.Load()), 10)},
		{"oldest", "0"},
		// As memcached: on where the bucket evicts to keep its quota (a
		// memcached bucket, an ephemeral one with nruEviction).
		{"evictions", onOff(evicts(s.settings()))},
		{"domain_socket", "NULL"},
		{"cas_enabled", "yes"},
		{"binding_protocol", "ascii"},
		{"auth_enabled_sasl", "no"},
		{"auth_enabled_ascii", "no"},
		{"item_size_max", strconv.Itoa(s.opts.MaxItemSize)},
		{"maxconns_fast", "yes"},
		// As memcached -F: no while flush_all is refused (the bucket's
		// flushEnabled is off).
		{"flush_enabled", yn(s.flushEnabled())},
		{"dump_enabled", "no"},
		{"idle_timeout", i64(int64(max(s.opts.IdleTimeout, 0) / time.Second))},
		{"shutdown_command", yn(false)},
		{"max_line_len", strconv.Itoa(s.opts.MaxLineLen)},
		{"max_get_line_len", strconv.Itoa(s.opts.MaxGetLineLen)},
		{"bucket", s.bucketName()},
	}
}

// evicts reports whether a bucket with settings s evicts items to keep its
// quota.
func evicts(s engine.BucketSettings) bool {
	return s.Type == engine.Memcached || s.Type == engine.Ephemeral && s.EvictionPolicy == engine.NRUEviction
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}
