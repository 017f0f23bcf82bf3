package engine

import (
	"fmt"
	"time"
)

// HoldCommits keeps the bucket's flusher from committing until release is
// called (a couchbase bucket's store holds its file's writer lock), so that
// a test can look at a write that is queued but not yet on disk.
func HoldCommits(b *Bucket) (release func(), err error) {
	switch st := b.store.st.(type) {
	case *boltStorage:
		return st.holdWrites()
	case *pebbleStorage:
		return st.holdWrites()
	}
	return nil, fmt.Errorf("bucket %s keeps nothing on disk", b.name)
}

// StoreKeysRead returns how many document keys the bucket's store has read
// for listings (0 for a bucket that keeps nothing on disk).
func StoreKeysRead(b *Bucket) int64 {
	switch st := b.store.st.(type) {
	case *boltStorage:
		return st.keysRead.Load()
	case *pebbleStorage:
		return st.keysRead.Load()
	}
	return 0
}

// EvictItems takes every item of b that may leave memory whole (its
// version on disk) out of it at once, as a fullEviction bucket's eviction
// does, and returns how many left.
func EvictItems(b *Bucket) int { return evictItems(b, func(string) bool { return true }) }

// SetTTLCatchUp sets how often b's TTL re-evaluations look for partitions
// this node has come to lead (passes started after the call).
func SetTTLCatchUp(b *Bucket, every time.Duration) {
	b.repl.ttl.mu.Lock()
	defer b.repl.ttl.mu.Unlock()
	b.repl.ttl.catchUp = every
}

// TTLCaughtUp returns how many documents the latest re-evaluation of
// collection cid re-wrote after its first pass, in partitions b came to
// lead since.
func TTLCaughtUp(b *Bucket, cid CollectionID) int64 {
	b.repl.ttl.mu.Lock()
	defer b.repl.ttl.mu.Unlock()
	if p := b.repl.ttl.passes[cid]; p != nil {
		return p.caughtUp.Load()
	}
	return 0
}

// SlideAsRead proposes the sliding extension a read of c's key that saw
// version d live would (on the partition's leader, in the background): a
// read that raced a newer version of the key.
func SlideAsRead(c *Collection, key string, d *Document) {
	if r := c.b.replicator(); r != nil {
		c.slideReplicated(r, docKey{cid: c.id, key: key}, d)
	}
}

// TTLPassExited returns a channel closed once b's latest re-evaluation of
// collection cid has returned, its catch-up included (nil when there is
// none).
func TTLPassExited(b *Bucket, cid CollectionID) <-chan struct{} {
	b.repl.ttl.mu.Lock()
	defer b.repl.ttl.mu.Unlock()
	if p := b.repl.ttl.passes[cid]; p != nil {
		return p.exited
	}
	return nil
}

// SetFlushCatchUp sets how often b's flush passes look for partitions this
// node has come to lead (passes started after the call).
func SetFlushCatchUp(b *Bucket, every time.Duration) {
	b.repl.flush.mu.Lock()
	defer b.repl.flush.mu.Unlock()
	b.repl.flush.catchUp = every
}

// FlushPassExited returns a channel closed once b's latest flush pass has
// returned (nil when there is none).
func FlushPassExited(b *Bucket) <-chan struct{} {
	b.repl.flush.mu.Lock()
	defer b.repl.flush.mu.Unlock()
	if p := b.repl.flush.cur; p != nil {
		return p.exited
	}
	return nil
}
