package engine

import (
	"strings"
	"sync"

	"github.com/google/btree"
)

// expItem is one entry of the expiry index: a live document's expiration,
// key and value size (for the forecast's bytes; not part of the order).
type expItem struct {
	exp  int64
	key  docKey
	size int64
}

// secTotal is what expires in one second: documents and their bytes.
type secTotal struct{ docs, bytes int64 }

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
//
// Beside the entries it keeps, per expiration second, how many documents
// and bytes expire then, so a forecast costs the distinct seconds inside its
// horizon, not the documents.
type expiryIndex struct {
	mu    sync.Mutex
	tree  *btree.BTreeG[expItem]
	bySec map[int64]secTotal // expiration → totals of its entries
}

func newExpiryIndex() *expiryIndex {
	return &expiryIndex{tree: btree.NewG(32, expLess), bySec: map[int64]secTotal{}}
}

// update moves key from oldExp to newExp (either may be 0, meaning absent),
// with size its new value's size.
func (x *expiryIndex) update(k docKey, oldExp, newExp, size int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	// An unchanged expiration is replaced in place below (its size may
	// have changed): one tree operation, not two.
	if oldExp != 0 && oldExp != newExp {
		if old, ok := x.tree.Delete(expItem{exp: oldExp, key: k}); ok {
			x.addSec(old.exp, -1, -old.size)
		}
	}
	if newExp != 0 {
		// The index keeps its own copy of the key: k's may alias a
		// partition's arena chunk (table.go), which it would keep alive.
		k.key = strings.Clone(k.key)
		if old, ok := x.tree.ReplaceOrInsert(expItem{exp: newExp, key: k, size: size}); ok {
			x.addSec(old.exp, -1, -old.size)
		}
		x.addSec(newExp, 1, size)
	}
}

// addSec adds docs and bytes to the totals of second exp. Guarded by mu.
func (x *expiryIndex) addSec(exp, docs, bytes int64) {
	t := x.bySec[exp]
	t.docs += docs
	t.bytes += bytes
	if t.docs == 0 {
		delete(x.bySec, exp)
		return
	}
	x.bySec[exp] = t
}

// secondsIn calls fn with the totals of every second in (from, to] that has
// entries, in no particular order. It costs the fewer of to-from and the
// distinct seconds indexed.
func (x *expiryIndex) secondsIn(from, to int64, fn func(exp int64, t secTotal)) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if to-from <= int64(len(x.bySec)) {
		for s := from + 1; s <= to; s++ {
			if t, ok := x.bySec[s]; ok {
				fn(s, t)
			}
		}
		return
	}
	for s, t := range x.bySec {
		if s > from && s <= to {
			fn(s, t)
		}
	}
}

// dueTotals returns the documents and bytes whose expiration is at or
// before now: it costs what has expired, not the index's size.
func (x *expiryIndex) dueTotals(now int64) (docs, bytes int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.tree.Ascend(func(it expItem) bool {
		if it.exp > now {
			return false
		}
		docs++
		bytes += it.size
		return true
	})
	return docs, bytes
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

// len returns the number of documents with an expiration.
func (x *expiryIndex) len() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.tree.Len()
}
