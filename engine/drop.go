package engine

import (
	"context"
	"fmt"
	"maps"
	"slices"
)

// DropCollection removes a collection and every document in it, as
// Couchbase's DELETE .../scopes/{s}/collections/{c} does. The _default
// collection cannot be dropped here. Writes to the collection fail with
// ErrCollectionNotFound from the moment the drop is in the catalog; its
// documents then leave memory and disk. Change-feed consumers are not sent
// its documents' removal (view indexes index _default._default only).
func (b *Bucket) DropCollection(ctx context.Context, scope, name string) error {
	b.ddl.Lock()
	defer b.ddl.Unlock()
	ce, err := b.catalogCopy()
	if err != nil {
		return err
	}
	m := Manifest{Scopes: ce.Scopes}
	id, err := m.DropCollection(scope, name)
	if err != nil {
		return err
	}
	if err := b.commitCatalog(ce); err != nil {
		return err
	}
	return b.dropDocuments(ctx, map[CollectionID]bool{id: true})
}

// DropScope removes a scope with its collections and their documents. The
// _default scope cannot be dropped.
func (b *Bucket) DropScope(ctx context.Context, name string) error {
	b.ddl.Lock()
	defer b.ddl.Unlock()
	ce, err := b.catalogCopy()
	if err != nil {
		return err
	}
	m := Manifest{Scopes: ce.Scopes}
	dropped, err := m.DropScope(name)
	if err != nil {
		return err
	}
	ids := make(map[CollectionID]bool, len(dropped))
	for _, id := range dropped {
		ids[id] = true
	}
	if err := b.commitCatalog(ce); err != nil {
		return err
	}
	return b.dropDocuments(ctx, ids)
}

// dropDocuments removes every document of the given (already dropped)
// collections from memory and disk. A write to them that was on its way
// to disk when they were dropped is waited for first.
//
// REQUIRES: b.ddl held, the collections gone from the catalog.
func (b *Bucket) dropDocuments(ctx context.Context, ids map[CollectionID]bool) error {
	if err := b.WaitWarm(ctx); err != nil {
		return err
	}
	release, err := b.allKeysIn(ctx, slices.Collect(maps.Keys(ids)))
	if err != nil {
		return err
	}
	defer release()
	if err := b.Sync(ctx); err != nil {
		return err
	}
	var last *commitBatch
	for _, p := range b.parts {
		if err := b.lockSettled(ctx, p, func(k docKey) bool { return ids[k.cid] }); err != nil {
			return err
		}
		cb, err := b.dropDocsLocked(p, func(cid CollectionID) bool { return ids[cid] })
		p.mu.Unlock()
		if err != nil {
			return err
		}
		if cb != nil {
			last = cb
		}
	}
	return last.wait(ctx)
}

// dropDocsLocked removes from p's memory every document and tombstone of
// the collections drop says, and queues their removal from the store; it
// returns the batch of the last one queued (nil when none was).
//
// REQUIRES: p.mu held for writing, no write of those collections pending
// in p.
func (b *Bucket) dropDocsLocked(p *partition, drop func(CollectionID) bool) (*commitBatch, error) {
	var last *commitBatch
	var failed error
	p.mu.docs.each(func(i uint32) bool {
		if !drop(CollectionID(p.mu.docs.recs[i].cid)) {
			return true
		}
		k := p.mu.docs.key(i)
		old, queued := p.mu.docs.remove(k)
		b.removed(p, old, queued)
		// The document already left memory: committing its removal
		// publishes nothing. A tombstone holds no expiry entry.
		r := record{purge: true, key: k, part: p.id, seq: old.seq}
		if old.deleted {
			b.tombs.Add(-1)
		} else {
			b.currItems.Add(-1)
			b.exps.update(k, old.exp, 0, 0)
			r.oldExp = old.exp
		}
		cb, err := b.store.enqueue(r)
		if err != nil {
			failed = err
			return false
		}
		last = cb
		return true
	})
	return last, failed
}

// lockSettled takes p's lock for writing once no write of a key busy says
// is on its way to disk in p (waiting for them with Sync); it returns
// holding the lock, or with ctx's or the store's error without it.
func (b *Bucket) lockSettled(ctx context.Context, p *partition, busy func(docKey) bool) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		p.mu.Lock()
		settled := true
		for k := range p.mu.pending {
			if busy(k) {
				settled = false
				break
			}
		}
		if settled {
			return nil
		}
		p.mu.Unlock()
		if err := b.Sync(ctx); err != nil {
			return err
		}
	}
}

// DropPartition removes this node's copy of partition part, for a copy
// moved away from the node (its replication group left it): every document
// and tombstone of the partition leaves memory and the store, and the
// partition's counts and sequence numbers go back to 0, so that a copy of it
// that joins a group again later starts empty and takes its group's
// snapshot whole. A new history begins in which the partition starts at 0:
// a change-feed consumer that saw any of its changes rolls the partition
// back (RollbackPartitions; feed.Consumer asks when the history changes,
// and Consumer.Wait ends when it does) rather than keeping rows of
// documents this node no longer holds, or skipping the changes of a copy
// that joins again from 0. A partition that never held anything (sequence
// number 0) is left as it is.
//
// Nothing may write to the partition meanwhile (a replicated bucket's
// partition this node is no replica of takes no write).
func (b *Bucket) DropPartition(ctx context.Context, part int) error {
	return b.DropPartitions(ctx, []int{part})
}

// DropPartitions is DropPartition for several partitions, which begin one
// history together: a consumer that has not followed the histories of a
// burst of drops one by one (a node whose copies moved away drops many at
// once) still finds its own in the failover log, which keeps
// maxFailoverEntries of them, and rolls back only those partitions. A
// partition dropped before one that fails to drop begins its history all
// the same.
func (b *Bucket) DropPartitions(ctx context.Context, parts []int) (err error) {
	for _, part := range parts {
		if part < 0 || part >= len(b.parts) {
			return fmt.Errorf("%w: partition %d of %d", ErrInvalidOp, part, len(b.parts))
		}
	}
	b.ddl.Lock()
	defer b.ddl.Unlock()
	if err := b.WaitWarm(ctx); err != nil {
		return err
	}
	var reset []int
	defer func() {
		if len(reset) == 0 {
			return
		}
		high := b.HighSeqnos()
		b.histMu.Lock()
		b.history = beginHistory(b.history, high, b.cas.Load())
		herr := b.store.st.begin(b.history)
		b.histMu.Unlock()
		// A consumer waiting for changes learns of the new history now
		// (see Consumer.Wait), and rolls the partitions back.
		b.changed()
		if herr != nil && err == nil {
			err = fmt.Errorf("%w: partitions %v: start a history: %w", ErrStorage, reset, herr)
		}
	}()
	for _, part := range parts {
		was, err := b.dropPartitionLocked(ctx, part)
		if was {
			reset = append(reset, part)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// dropPartitionLocked drops the documents of partition part and sets its
// sequence numbers back to 0 (see DropPartition), and reports whether it
// did the latter (a partition that held nothing is left as it is). The
// caller begins the history. REQUIRES: b.ddl held, the bucket warm.
func (b *Bucket) dropPartitionLocked(ctx context.Context, part int) (reset bool, err error) {
	p := b.parts[part]
	p.mu.RLock()
	held := p.mu.seq
	p.mu.RUnlock()
	if held == 0 {
		return false, nil
	}
	release, err := b.keysIn(ctx, b.collectionIDs(), p)
	if err != nil {
		return false, err
	}
	defer release()
	if err := b.lockSettled(ctx, p, func(docKey) bool { return true }); err != nil {
		return false, err
	}
	if b.isClosed() {
		p.mu.Unlock()
		return false, ErrClosed
	}
	last, err := b.dropDocsLocked(p, func(CollectionID) bool { return true })
	p.mu.Unlock()
	if err != nil {
		return false, err
	}
	if err := last.wait(ctx); err != nil {
		return false, err
	}
	// After the removals' commit, which counts their sequence numbers
	// as committed.
	p.mu.Lock()
	p.setSeqLocked(0)
	p.mu.durable = 0
	p.mu.evictedMax, p.mu.evictedCAS = 0, 0
	clear(p.mu.acked)
	p.mu.locks = nil
	p.rebuildLogLocked() // empty now
	p.mu.Unlock()
	b.consumersMu.Lock()
	for _, seqs := range b.consumers {
		seqs[part] = 0 // the partition's tombstones are gone with it
	}
	b.consumersMu.Unlock()
	if err := b.store.st.forgetSeqno(p.id); err != nil {
		return true, fmt.Errorf("%w: partition %d: %w", ErrStorage, part, err)
	}
	return true, nil
}
