package engine

import (
	"context"
	"slices"
	"strings"
)

// Keys returns the collection's live documents whose keys lie between start
// and end, both included (end "" means no upper bound), in byte order of key:
// skip of them are passed over and at most limit returned (limit <= 0: all).
// total counts every live document in the range, skipped or not. Deleted and
// expired documents are never returned (an expired one is left for the
// expiry pager). A document is seen as last committed, as Get and Peek see
// it.
//
// The engine keeps no ordered index of keys: Keys visits every document of
// the bucket, one partition at a time under its read lock, and sorts the
// documents in the range, so its cost follows the size of the bucket (time)
// and of the range (memory), not the size of the page asked for. It suits
// browsing and administration, not a hot path.
func (c *Collection) Keys(ctx context.Context, start, end string, skip, limit int) (docs []*Document, total int, err error) {
	if c.b.isClosed() {
		return nil, 0, ErrClosed
	}
	now := c.b.clock.Now()
	var found []*Document
	for _, p := range c.b.parts {
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
		p.mu.RLock()
		for k, d := range p.mu.docs {
			if k.cid != c.id || k.key < start || end != "" && k.key > end {
				continue
			}
			if d.Deleted || d.ExpiredAt(now) {
				continue
			}
			found = append(found, d)
		}
		p.mu.RUnlock()
	}
	slices.SortFunc(found, func(a, b *Document) int { return strings.Compare(a.Key, b.Key) })
	total = len(found)
	if skip > 0 {
		found = found[min(skip, len(found)):]
	}
	if limit > 0 && len(found) > limit {
		found = found[:limit]
	}
	return slices.Clone(found), total, nil // the page alone, not the whole range
}
