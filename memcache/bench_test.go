package memcache

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// BenchmarkServerGetSet measures get/set operations per second on Mayfly's
// server over loopback: 50 concurrent clients, each on its own connection,
// one set for every four gets over 1000 keys of 100-byte values. The same
// load runs against a real memcached in BenchmarkMemcachedGetSet (build tag
// oracle).
func BenchmarkServerGetSet(b *testing.B) {
	f := newFixture(b, nil)
	benchGetSet(b, f.addr)
}

const (
	benchClients = 50
	benchKeys    = 1000
	benchValLen  = 100
)

// benchGetSet runs the get/set load against the server at addr and reports
// ops/s.
func benchGetSet(b *testing.B, addr string) { benchMix(b, addr, 5) }

// benchMixes are the loads BenchmarkServerMix and BenchmarkMemcachedMix
// run: one set in every setEvery operations (1: sets only; 0: gets only).
var benchMixes = []struct {
	name     string
	setEvery int64
}{{"sets", 1}, {"1set4gets", 5}, {"gets", 0}}

// BenchmarkServerMix runs each mix of benchMixes against Mayfly at each
// durability level of a couchbase bucket (every write on disk, or
// acknowledged from memory and flushed within the flush interval), and
// against an ephemeral bucket, over 50 connections, one command at a time
// per connection. BenchmarkMemcachedMix (build tag oracle) runs the same
// loads against a real memcached:
//
//	go test -tags oracle -run XXX -bench Mix -benchtime 100000x ./memcache/
func BenchmarkServerMix(b *testing.B) {
	for _, mix := range benchMixes {
		for _, lvl := range []struct {
			name  string
			typ   engine.BucketType
			level engine.Durability
		}{{"none", engine.Couchbase, engine.DurabilityNone}, {"persistToMajority", engine.Couchbase, engine.DurabilityPersistToMajority}, {"ephemeral", engine.Ephemeral, ""}} {
			b.Run(mix.name+"/"+lvl.name, func(b *testing.B) {
				eng, err := engine.Open(b.TempDir(), &engine.Options{NumPartitions: 64})
				if err != nil {
					b.Fatal(err)
				}
				defer eng.Close()
				bk, err := eng.CreateBucket(context.Background(), engine.BucketSettings{Name: "default", Type: lvl.typ, DurabilityMinLevel: lvl.level})
				if err != nil {
					b.Fatal(err)
				}
				srv, addr, done := serve(b, bk, nil)
				defer func() { srv.Close(); <-done }()
				benchMix(b, addr, mix.setEvery)
			})
		}
	}
}

// BenchmarkExternalMix runs benchMixes against the memcached-protocol server
// at $MAYFLY_BENCH_ADDR (skipped without it): a started `mayfly serve` or a
// memcached, each in its own process, so that its resident memory can be
// read after the run (BENCHMARKS.md, "Durability levels").
func BenchmarkExternalMix(b *testing.B) {
	addr := os.Getenv("MAYFLY_BENCH_ADDR")
	if addr == "" {
		b.Skip("MAYFLY_BENCH_ADDR is not set")
	}
	for _, mix := range benchMixes {
		b.Run(mix.name, func(b *testing.B) { benchMix(b, addr, mix.setEvery) })
	}
}

// benchMix runs a load of one set every setEvery operations (0: gets only)
// against the server at addr and reports ops/s.
func benchMix(b *testing.B, addr string, setEvery int64) {
	// Requests and replies are made up front: the clients share the CPUs.
	val := strings.Repeat("v", benchValLen)
	var setReqs, getReqs, getReplies [benchKeys][]byte
	for k := range benchKeys {
		setReqs[k] = fmt.Appendf(nil, "set key:%d 0 0 %d\r\n%s\r\n", k, benchValLen, val)
		getReqs[k] = fmt.Appendf(nil, "get key:%d\r\n", k)
		getReplies[k] = fmt.Appendf(nil, "VALUE key:%d 0 %d\r\n%s\r\nEND\r\n", k, benchValLen, val)
	}
	stored := []byte("STORED\r\n")

	conns := make([]net.Conn, benchClients)
	for i := range conns {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		defer nc.Close()
		conns[i] = nc
	}
	// Load every key once, so gets hit.
	{
		w := conns[0]
		r := bufio.NewReader(w)
		for k := range benchKeys {
			w.Write(setReqs[k])
			if l, err := r.ReadString('\n'); err != nil || l != "STORED\r\n" {
				b.Fatalf("preload: %q %v", l, err)
			}
		}
	}

	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	b.ResetTimer()
	for _, nc := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := bufio.NewReaderSize(nc, 4096)
			buf := make([]byte, 0, 256)
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				k := int(i*7919) % benchKeys
				req, want := getReqs[k], getReplies[k]
				if setEvery > 0 && i%setEvery == 0 {
					req, want = setReqs[k], stored
				}
				if _, err := nc.Write(req); err != nil {
					failed.Store(err)
					return
				}
				buf = buf[:len(want)]
				if _, err := io.ReadFull(r, buf); err != nil || !bytes.Equal(buf, want) {
					failed.Store(fmt.Errorf("%q: got %q (%v)", req, buf, err))
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	if err := failed.Load(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// BenchmarkPipelinedSets measures sets per second on a persisted bucket
// (every write waits for fsync) from 50 connections, each sending its sets
// in pipelines of benchDepth before reading the replies, as a pipelining
// client does: the sets of one pipeline share group commits.
func BenchmarkPipelinedSets(b *testing.B) {
	for _, depth := range []int{1, 16} {
		b.Run(fmt.Sprint("depth=", depth), func(b *testing.B) {
			eng, err := engine.Open(b.TempDir(), &engine.Options{NumPartitions: 64})
			if err != nil {
				b.Fatal(err)
			}
			defer eng.Close()
			bk, err := eng.CreateBucket(context.Background(), engine.BucketSettings{Name: "default", Type: engine.Couchbase})
			if err != nil {
				b.Fatal(err)
			}
			srv, addr, done := serve(b, bk, nil)
			defer func() { srv.Close(); <-done }()
			benchPipelinedSets(b, addr, depth)
		})
	}
}

func benchPipelinedSets(b *testing.B, addr string, depth int) {
	val := strings.Repeat("v", benchValLen)
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	conns := make([]net.Conn, benchClients)
	for i := range conns {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		defer nc.Close()
		conns[i] = nc
	}
	b.ResetTimer()
	for _, nc := range conns {
		wg.Go(func() {
			r := bufio.NewReaderSize(nc, 4096)
			var req []byte
			reply := make([]byte, len("STORED\r\n"))
			for {
				first := next.Add(int64(depth)) - int64(depth)
				if first >= int64(b.N) {
					return
				}
				n := min(int64(depth), int64(b.N)-first)
				req = req[:0]
				for i := first; i < first+n; i++ {
					req = fmt.Appendf(req, "set key:%d 0 0 %d\r\n%s\r\n", int(i*7919)%benchKeys, benchValLen, val)
				}
				if _, err := nc.Write(req); err != nil {
					failed.Store(err)
					return
				}
				for range n {
					if _, err := io.ReadFull(r, reply); err != nil || string(reply) != "STORED\r\n" {
						failed.Store(fmt.Errorf("got %q (%v)", reply, err))
						return
					}
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if err := failed.Load(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "sets/s")
}
