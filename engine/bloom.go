package engine

import (
	"context"
	"hash/maphash"
	"math"
	"math/bits"
	"strings"
	"sync/atomic"
)

// A couchbase bucket keeps, per partition, a Bloom filter of the keys its
// store holds (live documents and tombstones), as Couchbase's ep-engine
// keeps one per vBucket: a read of a key that memory does not hold asks
// the filter first, and reads the store only when the filter says the key
// may be there, so that a miss does not cost a disk seek. The filter is
// built at warm-up from the store's keys (a pass over keys only, before the
// documents load) and every committed version's key is added to it
// (published); deletions leave their keys in it (false positives, which
// cost a read that finds nothing), and a new filter, built at the next
// warm-up, forgets them.
//
// A filter grows without a rebuild: it is a chain of layers, each with
// twice the capacity of the one before and half its false-positive rate
// (a scalable Bloom filter), so that the chain's rate stays under
// bloomFPProb however many keys join after the filter was sized.
//
// Every method REQUIRES the partition's lock: held for writing by add, for
// reading at least by mayHave and the counters.

// bloomFPProb is the false-positive probability a partition's filter keeps
// (Couchbase's ep_bfilter_fp_prob, whose default is the same).
const bloomFPProb = 0.01

// bloomMinKeys is the least capacity a partition's filter starts with: a
// bucket has 1024 partitions, most of them small or empty.
const bloomMinKeys = 64

// bloomFilter is a partition's Bloom filter: its layers, newest last.
type bloomFilter struct {
	seed   maphash.Seed
	layers []bloomLayer
	keys   int64 // keys added that set a bit: about the distinct keys
}

// bloomLayer is one layer of a filter: m bits, k probes a key.
type bloomLayer struct {
	bits []uint64
	m    uint64
	k    uint32
	cap  int64 // keys it takes before the next layer starts
	n    int64 // keys added to it
}

// newBloomFilter returns an empty filter sized for about capacity keys.
func newBloomFilter(capacity int64) *bloomFilter {
	f := &bloomFilter{seed: maphash.MakeSeed()}
	f.grow(max(capacity, bloomMinKeys))
	return f
}

// grow starts a layer for capacity keys, at half the rate of the layer
// before (the first takes half of bloomFPProb: the chain's rates add up to
// less than bloomFPProb).
func (f *bloomFilter) grow(capacity int64) {
	p := bloomFPProb / 2 / math.Pow(2, float64(len(f.layers)))
	// m = -n ln p / (ln 2)^2 bits, k = (m/n) ln 2 probes.
	m := uint64(math.Ceil(-float64(capacity) * math.Log(p) / (math.Ln2 * math.Ln2)))
	m = (m + 63) &^ 63
	k := uint32(max(1, math.Round(float64(m)/float64(capacity)*math.Ln2)))
	f.layers = append(f.layers, bloomLayer{bits: make([]uint64, m/64), m: m, k: k, cap: capacity})
}

// bloomHashes returns the two hashes of k that a layer's probes combine
// (double hashing: probe i is h1 + i*h2).
func (f *bloomFilter) hashes(k docKey) (h1, h2 uint64) {
	h1 = maphash.String(f.seed, k.key) ^ uint64(k.cid)*0x9e3779b97f4a7c15
	// A second, independent hash from the first (splitmix64's finaliser),
	// odd so that the probes visit different bits.
	h2 = h1 + 0x9e3779b97f4a7c15
	h2 = (h2 ^ h2>>30) * 0xbf58476d1ce4e5b9
	h2 = (h2 ^ h2>>27) * 0x94d049bb133111eb
	h2 = (h2 ^ h2>>31) | 1
	return h1, h2
}

// has reports whether layer l may hold the key of hashes h1, h2.
func (l *bloomLayer) has(h1, h2 uint64) bool {
	for i := range uint64(l.k) {
		b, _ := bits.Mul64(h1+i*h2, l.m) // (h1+i*h2) mapped onto [0, m)
		if l.bits[b/64]&(1<<(b%64)) == 0 {
			return false
		}
	}
	return true
}

// set sets layer l's bits of the key of hashes h1, h2.
func (l *bloomLayer) set(h1, h2 uint64) {
	for i := range uint64(l.k) {
		b, _ := bits.Mul64(h1+i*h2, l.m)
		l.bits[b/64] |= 1 << (b % 64)
	}
}

// mayHave reports whether k may be among the keys added: false means it
// certainly is not.
func (f *bloomFilter) mayHave(k docKey) bool {
	h1, h2 := f.hashes(k)
	for i := range f.layers {
		if f.layers[i].has(h1, h2) {
			return true
		}
	}
	return false
}

// add adds k. A key the filter already answers for (added before, or a
// false positive) changes nothing.
func (f *bloomFilter) add(k docKey) {
	h1, h2 := f.hashes(k)
	for i := range f.layers {
		if f.layers[i].has(h1, h2) {
			return
		}
	}
	l := &f.layers[len(f.layers)-1]
	if l.n >= l.cap {
		f.grow(2 * l.cap)
		l = &f.layers[len(f.layers)-1]
	}
	l.set(h1, h2)
	l.n++
	f.keys++
}

// size returns the bytes the filter's bits take.
func (f *bloomFilter) size() int64 {
	var n int64
	for i := range f.layers {
		n += int64(len(f.layers[i].bits)) * 8
	}
	return n
}

// bloomState is a bucket's use of its partitions' filters.
type bloomState struct {
	// kept says the bucket keeps filters: a couchbase bucket (its store
	// is durable). Set when the bucket opens.
	kept bool
	// ready says the filters hold every key the store holds: a read of a
	// key that memory does not hold and that they rule out reads nothing.
	ready atomic.Bool
	// negatives counts reads of keys not in memory that the filters
	// answered without reading the store.
	negatives atomic.Int64
	// metaFetched counts keys whose metadata was read from the store
	// because memory did not hold it, for a caller that needed the
	// metadata only: a write, a delete (ep_bg_meta_fetched; a read of the
	// value counts in ep_bg_fetched).
	metaFetched atomic.Int64
}

// keepsBloom reports whether a bucket of settings s over store st keeps
// Bloom filters: a couchbase bucket, whose store is durable.
func keepsBloom(s BucketSettings, st storage) bool {
	return s.Type == Couchbase && st.durable()
}

// installBloom gives every partition an empty filter, before the bucket
// takes its first write.
func (b *Bucket) installBloom() {
	b.bloom.kept = true
	for _, p := range b.parts {
		p.mu.Lock()
		p.mu.bloom = newBloomFilter(bloomMinKeys)
		p.mu.Unlock()
	}
}

// sizeBloom replaces each partition's filter that holds no key yet with one
// sized for its share of total keys (the warm-up's estimate), so that the
// store's keys fill one layer rather than a chain of small ones.
func (b *Bucket) sizeBloom(total int64) {
	per := total / int64(len(b.parts))
	per += per / 8 // room for an estimate that is short, and for new keys
	if per <= bloomMinKeys {
		return
	}
	for _, p := range b.parts {
		p.mu.Lock()
		if p.mu.bloom != nil && p.mu.bloom.keys == 0 {
			p.mu.bloom = newBloomFilter(per)
		}
		p.mu.Unlock()
	}
}

// loadBloom adds every key st holds to its partition's filter (the
// warm-up's pass over keys, before the documents load) and then marks the
// filters ready. Keys written meanwhile join the filters as they are
// published.
func (b *Bucket) loadBloom(ctx context.Context, st storage) error {
	if !b.bloom.kept || b.bloom.ready.Load() {
		return nil
	}
	var later []docKey
	err := st.scanKeys(func(k docKey) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		// As the document load (loadDocs): the scan holds a read of the
		// store and must not wait on a partition's lock.
		p := b.partitionFor(k.key)
		if p.mu.TryLock() {
			p.mu.bloom.add(k)
			p.mu.Unlock()
		} else {
			k.key = strings.Clone(k.key)
			later = append(later, k)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, k := range later {
		p := b.partitionFor(k.key)
		p.mu.Lock()
		p.mu.bloom.add(k)
		p.mu.Unlock()
	}
	b.bloom.ready.Store(true)
	return nil
}

// dropBloom frees the filters of a bucket that no longer needs them: once
// a valueOnly bucket's warm-up is done, memory holds every key, and no read
// asks the store about a key memory does not hold. A fullEviction bucket
// keeps them: its keys may leave memory.
func (b *Bucket) dropBloom() {
	if !b.bloom.kept || b.Settings().EvictionPolicy == FullEviction {
		return
	}
	b.bloom.ready.Store(false)
	for _, p := range b.parts {
		p.mu.Lock()
		p.mu.bloom = nil
		p.mu.Unlock()
	}
}

// BloomStats are a bucket's Bloom filters, as cbstats shows them.
type BloomStats struct {
	// Enabled says the bucket keeps filters now (ep_bfilter_enabled): a
	// couchbase bucket while its warm-up runs (a valueOnly bucket frees
	// them once every key is in memory).
	Enabled bool
	// FPProb is the false-positive probability each filter keeps
	// (ep_bfilter_fp_prob).
	FPProb float64
	// Keys counts the keys the filters hold, about the distinct keys
	// added: the store's at warm-up and every key written since, deleted
	// ones included (the sum of cbstats' vb_N:bloom_filter_key_count).
	Keys int64
	// Size is the bytes the filters take (the sum of cbstats'
	// vb_N:bloom_filter_size).
	Size int64
	// Negatives counts reads of keys that memory did not hold which the
	// filters answered without reading the store (Mayfly's own).
	Negatives int64
	// MetaFetched counts keys whose metadata was read from the store
	// because memory did not hold it, for a caller that needed the
	// metadata only: a write, a delete (ep_bg_meta_fetched; a read of the
	// value counts in ep_bg_fetched).
	MetaFetched int64
}

// bloomStats returns the bucket's BloomStats.
func (b *Bucket) bloomStats() BloomStats {
	s := BloomStats{FPProb: bloomFPProb, Negatives: b.bloom.negatives.Load(), MetaFetched: b.bloom.metaFetched.Load()}
	for _, p := range b.parts {
		p.mu.RLock()
		if f := p.mu.bloom; f != nil {
			s.Enabled = true
			s.Keys += f.keys
			s.Size += f.size()
		}
		p.mu.RUnlock()
	}
	return s
}
