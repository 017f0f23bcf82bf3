package pager

import (
	"context"
	"math"
)

// purge removes bp's tombstones older than the bucket's purgeInterval (days,
// by the engine clock) that every change-feed consumer has consumed.
//
// REQUIRES: bp's token held.
func (m *Manager) purge(ctx context.Context, bp *bucketPager) (int, error) {
	age := int64(math.Round(bp.b.Settings().PurgeInterval * secondsPerDay))
	olderThan := bp.b.Clock().Now() - age
	total := 0
	for {
		n, more, err := bp.b.PurgeTombstones(ctx, olderThan, m.opts.MetadataPurgeBatchSize)
		total += n
		if err != nil {
			return total, err
		}
		if !more || n == 0 {
			break
		}
	}
	m.log.Debug("metadata purge", "bucket", bp.name, "purged", total, "older_than", olderThan)
	m.ev.MetadataPurged(bp.name, total)
	return total, nil
}

// PurgeMetadata runs a metadata purge pass over the named bucket now: it
// removes the tombstones older than the bucket's purgeInterval that every
// change-feed consumer (view index) has consumed, and returns how many. The
// engine counts them in ep_meta_data_purged. The next scheduled pass is
// Options.MetadataPurgePeriod after this one.
func (m *Manager) PurgeMetadata(ctx context.Context, bucket string) (int, error) {
	bp, err := m.bucket(bucket)
	if err != nil {
		return 0, err
	}
	ctx, done := m.withLife(ctx)
	defer done()
	if err := bp.acquire(ctx); err != nil {
		return 0, err
	}
	defer bp.release()
	ctx, unbind := bp.bind(ctx)
	defer unbind()
	now := bp.b.Clock().Now()
	n, err := m.purge(ctx, bp)
	bp.mu.Lock()
	bp.mu.nextPurge = addSat(now, m.opts.MetadataPurgePeriod)
	bp.mu.Unlock()
	return n, err
}
