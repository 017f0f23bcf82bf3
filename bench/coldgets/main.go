// Command coldgets times random gets of a kept bigrun store's documents
// straight from its pebble database, with the server stopped, under a
// block cache of a given size and with or without the tables' bloom
// filters read: how many blocks a get of an ejected value reads from disk
// (the block cache's misses a get), and its latency with the page cache
// dropped. It reads a store that `bench/bigrun -keep` left (WORKDIR/big/
// buckets/big/pebble); it writes nothing to it unless -compact is given.
//
//	go run ./bench/coldgets -dir WORKDIR/big/buckets/big/pebble -cache-mb 32 -filters
package main

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "coldgets:", err)
		os.Exit(1)
	}
}

func run() error {
	dir := flag.String("dir", "", "the store's pebble folder (WORKDIR/big/buckets/big/pebble of bigrun -keep)")
	cacheMB := flag.Int64("cache-mb", 32, "block cache MiB (a 1 GiB bucket's store has 32)")
	filters := flag.Bool("filters", true, "read the tables' bloom filters (10 bits a key, as the store writes them)")
	docs := flag.Int("docs", 5_000_000, "documents of the store (bigrun's keys doc00000000 on)")
	warm := flag.Int("warm", 20_000, "random gets before the timed ones, to fill the block cache as a running server's is")
	n := flag.Int("n", 20_000, "timed random gets")
	drop := flag.Bool("drop", true, "sync and drop the page cache (as root) between the warm and the timed gets")
	verbose := flag.Bool("v", false, "print pebble's metrics (levels, tables, caches) at open")
	flag.Parse()
	if *dir == "" {
		return errors.New("-dir is required")
	}
	cache := pebble.NewCache(*cacheMB << 20)
	o := &pebble.Options{Cache: cache, FormatMajorVersion: pebble.FormatNewest, ReadOnly: true}
	if *filters {
		for i := range o.Levels {
			o.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
		}
	}
	db, err := pebble.Open(*dir, o)
	cache.Unref()
	if err != nil {
		return fmt.Errorf("open %s: %w", *dir, err)
	}
	defer db.Close()
	if *verbose {
		fmt.Println(db.Metrics().String())
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 19)) // wall clock: a seed
	get := func() (time.Duration, error) {
		k := fmt.Sprintf("doc%08d", rng.IntN(*docs))
		key := make([]byte, 5+len(k)) // the engine's document key: 'd', collection 0, the key
		key[0] = 'd'
		binary.BigEndian.PutUint32(key[1:], 0)
		copy(key[5:], k)
		start := time.Now() // wall clock: the benchmark times real reads
		_, closer, err := db.Get(key)
		d := time.Since(start)
		if err != nil {
			return d, fmt.Errorf("get %s: %w", k, err)
		}
		return d, closer.Close()
	}
	for range *warm {
		if _, err := get(); err != nil {
			return err
		}
	}
	if *drop {
		syscall.Sync()
		if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("1"), 0); err != nil {
			fmt.Fprintf(os.Stderr, "coldgets: drop the page cache: %v (not root?): the gets read a warm page cache\n", err)
		}
	}
	before := db.Metrics()
	lat := make([]time.Duration, *n)
	for i := range lat {
		if lat[i], err = get(); err != nil {
			return err
		}
	}
	after := db.Metrics()
	slices.Sort(lat)
	q := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1))] }
	misses := after.BlockCache.Misses - before.BlockCache.Misses
	fmt.Printf("cache %d MiB, filters %v: %d gets, p50 %v, p90 %v, p99 %v, p99.9 %v; block cache misses %.2f a get (hits %d); filter hits %d, misses %d\n",
		*cacheMB, *filters, *n, q(.5), q(.9), q(.99), q(.999),
		float64(misses)/float64(*n), after.BlockCache.Hits-before.BlockCache.Hits,
		after.Filter.Hits-before.Filter.Hits, after.Filter.Misses-before.Filter.Misses)
	return nil
}
