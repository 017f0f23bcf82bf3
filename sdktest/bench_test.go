package sdktest

import (
	"context"
	"net"
	"strconv"
	"sync/atomic"
	"testing"

	gomemcache "github.com/bradfitz/gomemcache/memcache"

	"github.com/mayflydb/mayfly/memcache"
)

// The official SDK's upserts and gets on the KV port, beside a memcached
// client's sets and gets on the memcached text port of the same kind of
// server (fsync on every group commit), in the same run:
//
//	cd sdktest && go test -run '^$' -bench . -benchtime 20000x
//
// Each benchmark drives the server from GOMAXPROCS*16 goroutines: gocb
// over its one KV connection (pipelined), gomemcache over a connection per
// goroutine.

func BenchmarkGocbUpsert(b *testing.B) {
	s := startWith(b, false)
	_, coll := s.connect(b, user, password)
	benchParallel(b, func(i int) error {
		_, err := coll.Upsert("k"+strconv.Itoa(i), map[string]int{"i": i}, nil)
		return err
	})
}

func BenchmarkGocbGet(b *testing.B) {
	s := startWith(b, false)
	_, coll := s.connect(b, user, password)
	if _, err := coll.Upsert("k", map[string]int{"i": 1}, nil); err != nil {
		b.Fatal(err)
	}
	benchParallel(b, func(int) error {
		_, err := coll.Get("k", nil)
		return err
	})
}

// memcachedClient serves the memcached text port onto the server's bucket.
func (s *server) memcachedClient(b *testing.B) *gomemcache.Client {
	bkt, err := s.eng.Bucket(bucketName)
	if err != nil {
		b.Fatal(err)
	}
	mc, err := memcache.New(bkt, nil)
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go mc.Serve(context.Background(), ln)
	b.Cleanup(func() { mc.Close() })
	c := gomemcache.New(ln.Addr().String())
	c.MaxIdleConns = 256
	return c
}

func BenchmarkMemcachedSet(b *testing.B) {
	c := startWith(b, false).memcachedClient(b)
	benchParallel(b, func(i int) error {
		return c.Set(&gomemcache.Item{Key: "k" + strconv.Itoa(i), Value: []byte(`{"i":` + strconv.Itoa(i) + `}`)})
	})
}

func BenchmarkMemcachedGet(b *testing.B) {
	c := startWith(b, false).memcachedClient(b)
	if err := c.Set(&gomemcache.Item{Key: "k", Value: []byte(`{"i":1}`)}); err != nil {
		b.Fatal(err)
	}
	benchParallel(b, func(int) error {
		_, err := c.Get("k")
		return err
	})
}

// benchParallel runs op b.N times from many goroutines and reports ops/s.
func benchParallel(b *testing.B, op func(i int) error) {
	b.SetParallelism(16)
	b.ResetTimer()
	var next atomicCounter
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := op(next.inc()); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// atomicCounter numbers the operations.
type atomicCounter struct{ n atomic.Int64 }

func (c *atomicCounter) inc() int { return int(c.n.Add(1)) }
