package memcache_test

import (
	"context"
	"fmt"
	"net"
	"os"

	gomemcache "github.com/bradfitz/gomemcache/memcache"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/memcache"
)

// A memcached client stores a document with an expiry through the server.
func Example() {
	dir, err := os.MkdirTemp("", "mayfly-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	eng, err := engine.Open(dir, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer eng.Close()
	ctx := context.Background()
	bucket, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "default", Type: engine.Ephemeral})
	if err != nil {
		fmt.Println(err)
		return
	}

	srv, err := memcache.New(bucket, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	go srv.Serve(ctx, ln)

	mc := gomemcache.New(ln.Addr().String())
	if err := mc.Set(&gomemcache.Item{Key: "greeting", Value: []byte(`{"hello":"world"}`), Expiration: 3600}); err != nil {
		fmt.Println(err)
		return
	}
	doc, err := bucket.DefaultCollection().Get(ctx, "greeting")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(doc.Value), doc.Type, doc.Expiration > 0)
	// Output: {"hello":"world"} json true
}
