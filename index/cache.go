package index

import (
	"sync"
	"sync/atomic"
)

// PageCache holds decoded leaf pages of paged indexes (see Config.Cache)
// within a byte budget, least recently used out first. One cache may serve
// every index of a process, so that their pages share one budget. A page
// being read by a query stays readable after it leaves the cache: the cache
// only stops holding it.
type PageCache struct {
	mu     sync.Mutex
	budget int64
	used   int64
	owners uint64
	m      map[pageKey]*cacheEntry
	head   cacheEntry // sentinel of the recency list: head.next is the most recent
	hits   uint64
	misses uint64

	dirty        atomic.Int64 // see SetDirtyBudget
	dirtyUsed    atomic.Int64 // the dirty leaves of the cache's indexes, estimated bytes
	dirtyIndexes atomic.Int64 // how many of them hold dirty leaves
}

// pageKey names a page of one index (owner) in a cache.
type pageKey struct{ owner, page uint64 }

type cacheEntry struct {
	key        pageKey
	rows       []row
	size       int64
	prev, next *cacheEntry
}

// cacheEntryOverhead estimates the bytes of a cache entry and its map slot.
const cacheEntryOverhead = 128

// CacheStats is what a PageCache holds and how it has served.
type CacheStats struct {
	// Budget and Used are bytes: the cache's budget and what its pages
	// take now (estimated: page bytes, row slices, entries).
	Budget, Used int64
	// Pages is the number of pages held.
	Pages int
	// Hits and Misses count page reads served from the cache and from the
	// file.
	Hits, Misses uint64
}

// NewPageCache returns an empty cache of budget bytes (at least one page is
// held whatever the budget), whose indexes hold dirty leaves up to the same
// budget, together (see SetDirtyBudget).
func NewPageCache(budget int64) *PageCache {
	c := &PageCache{budget: budget, m: make(map[pageKey]*cacheEntry)}
	c.head.prev, c.head.next = &c.head, &c.head
	c.dirty.Store(budget)
	return c
}

// SetDirtyBudget sets the heap, estimated, that the paged indexes of the
// cache may give their dirty leaves together (the changes their Applies
// made, logged but held in memory until a write-back writes them as pages;
// see Config.Cache) before the largest of them writes back; at least 1 MiB
// is used. A larger budget writes a leaf changed by many Applies once
// rather than once per write-back. It returns c.
func (c *PageCache) SetDirtyBudget(n int64) *PageCache {
	c.dirty.Store(n)
	return c
}

// Stats returns the cache's figures.
func (c *PageCache) Stats() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return CacheStats{Budget: c.budget, Used: c.used, Pages: len(c.m), Hits: c.hits, Misses: c.misses}
}

// newOwner returns a key space for one index's pages.
func (c *PageCache) newOwner() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.owners++
	return c.owners
}

func (c *PageCache) unlink(e *cacheEntry) {
	e.prev.next, e.next.prev = e.next, e.prev
}

func (c *PageCache) pushFront(e *cacheEntry) {
	e.prev, e.next = &c.head, c.head.next
	c.head.next.prev = e
	c.head.next = e
}

func (c *PageCache) get(k pageKey) ([]row, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok {
		c.misses++
		return nil, false
	}
	c.hits++
	c.unlink(e)
	c.pushFront(e)
	return e.rows, true
}

// put holds rows as page k's, of size bytes, evicting the least recently
// used pages past the budget.
func (c *PageCache) put(k pageKey, rows []row, size int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[k]; ok {
		c.unlink(old)
		c.used -= old.size
	}
	e := &cacheEntry{key: k, rows: rows, size: size}
	c.m[k] = e
	c.pushFront(e)
	c.used += size
	for c.used > c.budget && c.head.prev != e {
		c.remove(c.head.prev)
	}
}

func (c *PageCache) remove(e *cacheEntry) {
	c.unlink(e)
	delete(c.m, e.key)
	c.used -= e.size
}

// drop forgets page k.
func (c *PageCache) drop(k pageKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[k]; ok {
		c.remove(e)
	}
}

// dropOwner forgets every page of owner (an index that closed).
func (c *PageCache) dropOwner(owner uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.m {
		if k.owner == owner {
			c.remove(e)
		}
	}
}
