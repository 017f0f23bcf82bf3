package engine

import (
	"sync"

	"github.com/google/btree"
)

// expItem is one entry of the expiry index.
type expItem struct {
	exp int64
	key docKey
}

func expLess(a, b expItem) bool {
	if a.exp != b.exp {
		return a.exp < b.exp
	}
	if a.key.cid != b.key.cid {
		return a.key.cid < b.key.cid
	}
	return a.key.key < b.key.key
}

// expiryIndex orders the live documents that have an expiration by
// (expiration, collection, key), so finding what has expired costs what has
// expired, not the bucket size.
type expiryIndex struct {
	mu   sync.Mutex
	tree *btree.BTreeG[expItem]
}

func newExpiryIndex() *expiryIndex {
	return &expiryIndex{tree: btree.NewG(32, expLess)}
}

// update moves key from oldExp to newExp (either may be 0, meaning absent).
func (x *expiryIndex) update(k docKey, oldExp, newExp int64) {
	if oldExp == newExp {
		return
	}
	x.mu.Lock()
	if oldExp != 0 {
		x.tree.Delete(expItem{exp: oldExp, key: k})
	}
	if newExp != 0 {
		x.tree.ReplaceOrInsert(expItem{exp: newExp, key: k})
	}
	x.mu.Unlock()
}

// due returns up to limit entries whose expiration is at or before now, in
// expiration order.
func (x *expiryIndex) due(now int64, limit int) []expItem {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []expItem
	x.tree.Ascend(func(it expItem) bool {
		if it.exp > now || len(out) == limit {
			return false
		}
		out = append(out, it)
		return true
	})
	return out
}

// dueAfter returns up to limit entries past after (from the first when after
// is nil) whose expiration is at or before now, in expiration order.
func (x *expiryIndex) dueAfter(now int64, after *expItem, limit int) []expItem {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []expItem
	visit := func(it expItem) bool {
		if it.exp > now || len(out) == limit {
			return false
		}
		if after == nil || expLess(*after, it) {
			out = append(out, it)
		}
		return true
	}
	if after == nil {
		x.tree.Ascend(visit)
	} else {
		x.tree.AscendGreaterOrEqual(*after, visit)
	}
	return out
}

// countDue returns how many entries are at or before now: it costs what has
// expired, not the index's size.
func (x *expiryIndex) countDue(now int64) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	n := 0
	x.tree.Ascend(func(it expItem) bool {
		if it.exp > now {
			return false
		}
		n++
		return true
	})
	return n
}

// len returns the number of documents with an expiration.
func (x *expiryIndex) len() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.tree.Len()
}
