package views

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/feed"
)

// A cluster node's view indexes hold only the partitions it covers (see
// Service.Cover): the indexer's Prepare leaves out the documents of the
// other partitions, whose feed positions move on all the same. Which
// partitions an index holds rows of is kept beside its file (coverPath),
// written after each change of them is durable in the index: an index
// whose partition is left out may be at a position in it without its rows,
// so a partition gained is rewound to 0 (read again from the start, as a
// copy dropped is: index.Index.Rewind) and one lost is rewound too (its
// rows removed). A crash between the rewind and the file leaves the file
// naming the old set, and the next start rewinds the same partitions
// again, which is harmless. No file: the index holds every partition (an
// index from before, or a single node's). Until Cover is called for a
// bucket (a cluster node restarted, before it reads its coverage again),
// its indexes keep the partitions they hold.

// coverSet is the set of partitions a bucket's indexes are to hold; a nil
// *coverSet, or nil parts, is every partition. A new set is a new pointer.
type coverSet struct {
	parts []bool
}

// covers reports whether parts (nil: every partition) holds p.
func covers(parts []bool, p int) bool { return parts == nil || p < len(parts) && parts[p] }

// Cover sets the partitions bucket's view indexes hold: parts[p] true for
// each partition p the node covers or is about to (nil: every partition,
// as a single node). Each running index drops the rows of the partitions
// it no longer holds and reads those it gains again from the start of
// their feed (by its next catch-up: CatchUpPartitions, a stale=false
// query, or the feed moving); an index opened later starts with the set.
// Queries of partitions an index does not hold find no rows there: the
// caller asks them only of the node that covers them.
func (s *Service) Cover(ctx context.Context, bucket string, parts []bool) error {
	var set *coverSet
	if parts != nil {
		set = &coverSet{parts: slices.Clone(parts)}
	}
	// The set is the bucket incarnation's: one created again under the
	// same name holds every partition until Cover is called for it.
	uuid := ""
	if b, err := s.eng.Bucket(bucket); err == nil {
		uuid = b.Settings().UUID
	}
	s.cover.Lock()
	if s.cover.m == nil {
		s.cover.m = map[string]coverEntry{}
	}
	s.cover.m[bucket] = coverEntry{uuid: uuid, set: set}
	s.cover.Unlock()
	bv, err := s.lookup(bucket)
	if err != nil {
		return err
	}
	var errs []error
	for _, ix := range bv.Members() {
		unlock, err := ix.feed.Lock(ctx)
		if err != nil {
			if errors.Is(err, ErrClosed) {
				continue // replaced meanwhile: its successor takes the set
			}
			errs = append(errs, err)
			continue
		}
		err = ix.syncCover(ctx, ix.feed.Ack)
		unlock()
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// barrierWait bounds how long CatchUpPartitions waits for the copies to
// be made current (a partition without a leader): its caller retries.
const barrierWait = 30 * time.Second

// CatchUpPartitions brings every view index of bucket up to the node's
// copies of partitions parts as they are once made current (each one's
// leader's acknowledged writes: engine.Bucket.MakeCurrent, given up to
// barrierWait), as a stale=false query does: a node about to cover parts
// reports it caught up after this returns.
func (s *Service) CatchUpPartitions(ctx context.Context, bucket string, parts []int) error {
	bv, err := s.lookup(bucket)
	if err != nil {
		return err
	}
	bctx, cancel := context.WithTimeout(ctx, barrierWait)
	err = bv.Bucket.MakeCurrent(bctx, parts)
	cancel()
	if err != nil {
		return fmt.Errorf("views: making partitions current before indexing them: %w", err)
	}
	for _, ix := range bv.Members() {
		if err := ix.feed.CatchUpNow(ctx); err != nil {
			return fmt.Errorf("views: %s: %w", ix.id, err)
		}
	}
	return nil
}

// coverEntry is a bucket's set in Service.cover, with the UUID of the
// bucket's incarnation Cover was called for ("": no bucket then).
type coverEntry struct {
	uuid string
	set  *coverSet
}

// wantCover is the set the service has for the indexer's bucket b; false
// when Cover was not called for it (or for another incarnation of its
// name, deleted since): an index then keeps the partitions it holds (all
// of them but on a cluster node restarted, whose indexes keep their set
// until the node's coverage is known again).
func (s *Service) wantCover(b *engine.Bucket) (*coverSet, bool) {
	s.cover.Lock()
	defer s.cover.Unlock()
	e, ok := s.cover.m[b.Name()]
	if !ok || e.uuid != b.Settings().UUID {
		return nil, false
	}
	return e.set, true
}

// BeforeCatchUp brings the partitions the index holds in line with the
// service's set for its bucket (feed.BeforeCatchUp).
func (ix *indexer) BeforeCatchUp(ctx context.Context, ack func([]uint64) error) error {
	return ix.syncCover(ctx, ack)
}

// The indexer must stay a feed.BeforeCatchUp: a sink whose methods no longer
// match the interface would silently lose its BeforeCatchUp.
var _ feed.BeforeCatchUp = (*indexer)(nil)

// BeforeCatchUpDue reports whether the service's set for the index's
// bucket is not the one the index last applied (feed.BeforeCatchUp):
// syncCover records the set after its rewinds.
// It takes no lock: a stale=false query whose index holds its target asks
// it, and must not wait out a cover file's fsync.
func (ix *indexer) BeforeCatchUpDue() bool {
	want, ok := ix.want()
	if !ok {
		return false // syncCover keeps the partitions the index holds
	}
	a := ix.applied.Load()
	return a == nil || want != a.set
}

// appliedCover is the service's set an index last applied (see
// indexer.applied); set may be nil (every partition).
type appliedCover struct{ set *coverSet }

// syncCover rewinds the partitions whose holding differs between what the
// index holds and the service's set, then records the set (beside the
// index's file, and for Prepare). The caller holds the right to change the
// sink.
func (ix *indexer) syncCover(ctx context.Context, ack func([]uint64) error) error {
	want, ok := ix.want()
	ix.cover.Lock()
	held, stored, same := ix.cover.parts, ix.cover.stored, ix.cover.known && want == ix.cover.set
	ix.cover.Unlock()
	if !ok || same {
		return nil
	}
	var wantParts []bool
	if want != nil {
		wantParts = want.parts
	}
	_, seqs := ix.Position()
	var rewind []int
	for p := range seqs {
		if seqs[p] != 0 && (!stored || covers(held, p) != covers(wantParts, p)) {
			rewind = append(rewind, p)
		}
	}
	if len(rewind) > 0 {
		next := slices.Clone(seqs)
		for _, p := range rewind {
			next[p] = 0
		}
		err := ix.Rewind(ctx, rewind, func() {
			if err := ack(next); err != nil {
				ix.log("views: acknowledging changes", "ddoc", ix.id, "err", err)
			}
		})
		if err != nil {
			return fmt.Errorf("views: %s: setting the partitions it holds: %w", ix.id, err)
		}
	}
	ix.cover.Lock()
	defer ix.cover.Unlock()
	if !stored || (held == nil) != (wantParts == nil) || !slices.Equal(held, wantParts) {
		if err := writeCover(coverPath(ix.cfg.Path), wantParts, !ix.cfg.NoSync); err != nil {
			return err
		}
	}
	ix.filter.Store(&wantParts)
	ix.cover.parts, ix.cover.stored, ix.cover.set, ix.cover.known = wantParts, true, want, true
	ix.applied.Store(&appliedCover{set: want})
	return nil
}

// coverPath is the file beside an index (at path; "" in memory) that says
// which partitions it holds.
func coverPath(path string) string {
	if path == "" {
		return ""
	}
	return path + ".cover"
}

// coverFile is a coverPath file's content.
type coverFile struct {
	// Partitions are the partitions held, sorted; All says every one.
	All        bool  `json:"all,omitempty"`
	Partitions []int `json:"partitions,omitempty"`
}

// readCover reads the partitions an index holds from path: nil and true
// for every partition (no file); ok false when the file cannot be read
// (every partition at a position is then rewound).
func readCover(path string, n int) (parts []bool, ok bool) {
	if path == "" {
		return nil, true
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, true
	}
	var f coverFile
	if err != nil || json.Unmarshal(data, &f) != nil {
		return nil, false
	}
	if f.All {
		return nil, true
	}
	parts = make([]bool, n)
	for _, p := range f.Partitions {
		if p < 0 || p >= n {
			return nil, false
		}
		parts[p] = true
	}
	return parts, true
}

// writeCover writes parts (nil: every partition) to path ("": nothing),
// replacing the file whole (a crash leaves the old one or the new one).
func writeCover(path string, parts []bool, sync bool) error {
	if path == "" {
		return nil
	}
	f := coverFile{All: parts == nil}
	for p, in := range parts {
		if in {
			f.Partitions = append(f.Partitions, p)
		}
	}
	data, err := json.Marshal(f)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := writeSynced(tmp, data, sync); err != nil {
		return fmt.Errorf("views: recording the partitions an index holds: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("views: recording the partitions an index holds: %w", err)
	}
	if sync {
		if d, err := os.Open(filepath.Dir(path)); err == nil {
			d.Sync()
			d.Close()
		}
	}
	return nil
}

// writeSynced writes data to a new file at path, synced when sync.
func writeSynced(path string, data []byte, sync bool) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
