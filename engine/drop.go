package engine

import (
	"context"
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
		for {
			if err := ctx.Err(); err != nil {
				return err
			}
			p.mu.Lock()
			busy := false
			for k := range p.mu.pending {
				if ids[k.cid] {
					busy = true
					break
				}
			}
			if !busy {
				break
			}
			p.mu.Unlock()
			if err := b.Sync(ctx); err != nil {
				return err
			}
		}
		var failed error
		p.mu.docs.each(func(i uint32) bool {
			if !ids[CollectionID(p.mu.docs.recs[i].cid)] {
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
		if failed != nil {
			p.mu.Unlock()
			return failed
		}
		p.mu.Unlock()
	}
	return last.wait(ctx)
}
