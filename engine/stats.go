package engine

// Stats are a bucket's statistics, named after cbstats.
type Stats struct {
	// CurrItems counts live documents, expired-but-unpurged ones included.
	CurrItems int64
	// Tombstones counts deleted documents whose metadata is not yet purged.
	Tombstones int64
	// ExpiredAccess counts documents expired because a read found them expired.
	ExpiredAccess int64
	// ExpiredPager counts documents expired by the expiry pager.
	ExpiredPager int64
	// Expired is ExpiredAccess + ExpiredPager.
	Expired int64
	// PagerRuns counts expiry pager runs.
	PagerRuns int64
	// MetaDataPurged counts tombstones removed by the metadata purger.
	MetaDataPurged int64
	// WithExpiry counts live documents that carry an expiration.
	WithExpiry int64
	// ExpiredUnpurged counts documents whose expiration has passed that are
	// not purged yet (they still count in CurrItems and have view rows).
	ExpiredUnpurged int64
	// QueueSize counts mutations queued for disk, not yet taken by a
	// commit (ep_queue_size).
	QueueSize int64
	// FlusherTodo counts the mutations the commit in flight is writing
	// (ep_flusher_todo); QueueSize + FlusherTodo wait for disk.
	FlusherTodo int64
	// CommitNum counts the commits made (ep_commit_num).
	CommitNum int64
	// CommitTimeMS is how long the last commit took, in milliseconds
	// (ep_commit_time); CommitTimeTotalMS adds up every commit's
	// (ep_commit_time_total).
	CommitTimeMS, CommitTimeTotalMS int64
	// CommitFailed counts commits that failed (ep_item_commit_failed).
	CommitFailed int64
	// SlidingExtends counts expirations that reads slid forward on
	// collections with idleTTL or maxLifetime (ep_sliding_extends); an
	// extension lost to a crash or a failed commit still counts.
	SlidingExtends int64
	// MemUsed is the memory the bucket's documents hold, by the memory
	// owner's account: KVSize plus the estimated overhead of each item's
	// index slot, change-log entry, expiry entry and LRU entry (mem_used).
	MemUsed int64
	// StorageMemUsed is the memory the bucket's store holds beside the
	// memory owner's account, outside mem_used and the quota: a pebble
	// store's block cache and memtables, as pebble reports them, at most
	// Bucket.StorageMemBudget (ep_mem_used_secondary, Couchbase's memory of
	// a magma bucket's storage layer); 0 for other stores.
	StorageMemUsed int64
	// KVSize is the bytes of the committed versions' metadata, keys and
	// values held in memory (ep_kv_size).
	KVSize int64
	// MemHighWat and MemLowWat are the water marks, 85% and 75% of the
	// quota (ep_mem_high_wat, ep_mem_low_wat): a bucket that evicts starts
	// past the high one and stops at the low one.
	MemHighWat, MemLowWat int64
	// NumValueEjects counts values ejected from memory by a couchbase
	// bucket's value eviction (ep_num_value_ejects).
	NumValueEjects int64
	// BgFetched counts values read back from disk because memory did not
	// hold them: ejected values, and documents read with their values
	// while out of memory whole or not loaded yet by the warm-up
	// (ep_bg_fetched).
	BgFetched int64
	// NonResident counts live documents whose value is not in memory
	// (ep_num_non_resident).
	NonResident int64
	// ResidentPct is the percentage of live documents whose value is in
	// memory, 100 for an empty bucket (vb_active_perc_mem_resident).
	ResidentPct int64
	// Evictions counts items evicted to keep the quota (evictions): whole
	// items of a memcached bucket, documents deleted by an ephemeral
	// bucket's nruEviction.
	Evictions int64
	// TmpOOMErrors counts writes refused with ErrTempOOM
	// (ep_tmp_oom_errors).
	TmpOOMErrors int64
	// StorageError is why the bucket refuses writes now (a full or failing
	// disk), or "" while it takes them.
	StorageError string
	// Warmup is the warm-up's progress. While it runs, the counters above
	// count only what is loaded so far.
	Warmup WarmupStats
	// Bloom is the bucket's Bloom filters of the keys its store holds.
	Bloom BloomStats
}

// Stats returns the bucket's statistics.
func (b *Bucket) Stats() Stats {
	s := Stats{
		CurrItems:      b.currItems.Load(),
		Tombstones:     b.tombs.Load(),
		ExpiredAccess:  b.stats.expiredAccess.Load(),
		ExpiredPager:   b.stats.expiredPager.Load(),
		PagerRuns:      b.stats.pagerRuns.Load(),
		MetaDataPurged: b.stats.metaPurged.Load(),
		SlidingExtends: b.stats.slidingExtends.Load(),
		WithExpiry:     int64(b.exps.len()),
	}
	s.MemUsed, s.KVSize = b.memUsed(), b.mem.kv.Load()
	s.MemHighWat, s.MemLowWat = b.mem.high(), b.mem.low()
	if sm, ok := b.store.st.(storageMem); ok {
		s.StorageMemUsed = sm.memHeld()
	}
	s.Evictions, s.TmpOOMErrors = b.mem.evictions.Load(), b.mem.tmpOOM.Load()
	s.NumValueEjects, s.BgFetched = b.mem.ejects.Load(), b.mem.bgFetched.Load()
	s.NonResident, s.ResidentPct = b.mem.nonResident.Load(), b.residentPct()
	s.ExpiredUnpurged, _ = b.exps.dueTotals(b.clock.Now())
	s.Expired = s.ExpiredAccess + s.ExpiredPager
	s.Warmup = b.WarmupStats()
	s.Bloom = b.bloomStats()
	queued, todo := b.store.backlog()
	s.QueueSize, s.FlusherTodo = int64(queued), int64(todo)
	s.CommitNum = b.store.commitNum.Load()
	s.CommitTimeMS = b.store.commitLast.Load() / 1e6
	s.CommitTimeTotalMS = b.store.commitTotal.Load() / 1e6
	s.CommitFailed = b.store.commitFailed.Load()
	if err := b.store.failure(); err != nil {
		s.StorageError = err.Error()
	}
	return s
}

// CountPagerRun records one expiry pager run in the statistics.
func (b *Bucket) CountPagerRun() { b.stats.pagerRuns.Add(1) }

// storageMem is a store that holds memory of its own (caches, write
// buffers) beside the documents the memory owner accounts for.
type storageMem interface {
	// memHeld returns the bytes it holds now.
	memHeld() int64
	// memBudget returns the most it holds.
	memBudget() int64
}

// StorageMemBudget returns the most memory the bucket's store holds beside
// the memory owner's account (Stats.StorageMemUsed): a pebble store's block
// cache and memtables, 64 MiB; 0 for a store that holds none of its own.
// It is fixed: no quota or setting scales it.
func (b *Bucket) StorageMemBudget() int64 {
	if sm, ok := b.store.st.(storageMem); ok {
		return sm.memBudget()
	}
	return 0
}
