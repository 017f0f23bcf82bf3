package engine

import (
	"context"
	"fmt"
	"testing"
	"unsafe"
)

// A write takes the caller's value only until it returns: the engine copies
// it into the partition's arena (stageLocked), so a caller that reuses its
// buffer at once (the memcached port parses every command in its read
// buffer) changes no version, whether the write is acknowledged from memory
// and on its way to disk or committed. Once committed, the table's record
// is that copy itself (adopted, not copied a second time), and an empty
// value reads back empty.
func TestWriteValueCopiedOnceIntoTheArena(t *testing.T) {
	ctx := context.Background()
	for _, typ := range []BucketType{Couchbase, Ephemeral, Memcached} {
		t.Run(string(typ), func(t *testing.T) {
			eng, err := Open(t.TempDir(), &Options{NumPartitions: 8})
			if err != nil {
				t.Fatal(err)
			}
			defer eng.Close()
			set := BucketSettings{Name: "b", Type: typ}
			if typ == Couchbase {
				set.DurabilityMinLevel = DurabilityNone
			}
			b, err := eng.CreateBucket(ctx, set)
			if err != nil {
				t.Fatal(err)
			}
			c := b.DefaultCollection()
			var written []*Document
			for i := range 20 {
				key := fmt.Sprintf("k%d", i%5) // overwrites too
				buf := []byte(fmt.Sprintf(`{"v":"write %02d"}`, i))
				d, err := c.Upsert(ctx, key, buf, nil)
				if err != nil {
					t.Fatal(err)
				}
				copy(buf, `{"v":"XXXXXXXXXX"}`) // the caller's buffer, reused
				if got, err := c.Get(ctx, key); err != nil || string(got.Value) != fmt.Sprintf(`{"v":"write %02d"}`, i) {
					t.Fatalf("write %d read back before its commit: %q, %v", i, got.Value, err)
				}
				written = append(written, d)
			}
			if err := b.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			for i, d := range written[15:] {
				want := fmt.Sprintf(`{"v":"write %02d"}`, 15+i)
				if string(d.Value) != want {
					t.Fatalf("the version write %d returned holds %q", 15+i, d.Value)
				}
				k := docKey{cid: c.ID(), key: d.Key}
				p := b.partitionFor(d.Key)
				p.mu.RLock()
				rec, ok := p.mu.docs.find(k)
				var committed []byte
				if ok {
					committed = p.mu.docs.doc(rec).Value
				}
				p.mu.RUnlock()
				if string(committed) != want {
					t.Fatalf("%s committed as %q, want %q", d.Key, committed, want)
				}
				if unsafe.SliceData(committed) != unsafe.SliceData(d.Value) {
					t.Errorf("%s: the committed record holds a second copy of the value, not the one staged for the write", d.Key)
				}
			}
			if _, err := c.Upsert(ctx, "empty", []byte{}, nil); err != nil {
				t.Fatal(err)
			}
			if got, err := c.Get(ctx, "empty"); err != nil || len(got.Value) != 0 {
				t.Fatalf("an empty value reads back as %#v, %v", got.Value, err)
			}
			if err := b.Check(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
