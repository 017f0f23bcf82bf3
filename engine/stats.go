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
	// QueueSize counts mutations waiting for disk (ep_queue_size).
	QueueSize int64
	// CommitFailed counts commits that failed (ep_item_commit_failed).
	CommitFailed int64
	// SlidingExtends counts expirations that reads slid forward on
	// collections with idleTTL or maxLifetime (ep_sliding_extends); an
	// extension lost to a crash or a failed commit still counts.
	SlidingExtends int64
	// StorageError is why the bucket refuses writes now (a full or failing
	// disk), or "" while it takes them.
	StorageError string
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
	s.ExpiredUnpurged, _ = b.exps.dueTotals(b.clock.Now())
	s.Expired = s.ExpiredAccess + s.ExpiredPager
	s.QueueSize = int64(b.store.pending())
	s.CommitFailed = b.store.commitFailed.Load()
	if err := b.store.failure(); err != nil {
		s.StorageError = err.Error()
	}
	return s
}

// CountPagerRun records one expiry pager run in the statistics.
func (b *Bucket) CountPagerRun() { b.stats.pagerRuns.Add(1) }
