package engine_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// TestDeepValueIsStoredAsBinary: a value nested deeper than any JSON
// answer can encode (millions of '[', as a memcached or KV client may send
// under the 20 MiB limit) is stored and read back as a binary value, not a
// fatal stack overflow in the JSON check (a review crashed the server so).
func TestDeepValueIsStoredAsBinary(t *testing.T) {
	n := 10_000_000
	v := append(bytes.Repeat([]byte{'['}, n), bytes.Repeat([]byte{']'}, n)...)
	if got := engine.DetectType(v); got != engine.TypeBinary {
		t.Fatalf("DetectType of %d levels: %s, want %s", n, got, engine.TypeBinary)
	}
	eng, err := engine.Open(t.TempDir(), &engine.Options{NoSync: true, NumPartitions: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	b, err := eng.CreateBucket(context.Background(), engine.BucketSettings{Name: "b"})
	if err != nil {
		t.Fatal(err)
	}
	c := b.DefaultCollection()
	if _, err := c.Upsert(context.Background(), "deep", v, nil); err != nil {
		t.Fatal(err)
	}
	d, err := c.Get(context.Background(), "deep")
	if err != nil || d.Type != engine.TypeBinary || !bytes.Equal(d.Value, v) {
		t.Fatalf("read back: %v, type %v, %d bytes", err, d.Type, len(d.Value))
	}
	if got := engine.DetectType([]byte(`{"a":[1,{"b":2}]}`)); got != engine.TypeJSON {
		t.Errorf("a small JSON object: %s", got)
	}
}
