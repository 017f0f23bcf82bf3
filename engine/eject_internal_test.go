package engine

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"
	"testing"
)

// An ejected copy keeps every exported field of its version but the value,
// and a copy with the value read back is the version again: a field added
// to Document and forgotten in copyMeta fails here.
func TestEjectedCopyKeepsEveryField(t *testing.T) {
	d := &Document{}
	v := reflect.ValueOf(d).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		if !v.Type().Field(i).IsExported() {
			continue
		}
		switch f.Kind() {
		case reflect.String:
			f.SetString("s" + v.Type().Field(i).Name)
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Uint16, reflect.Uint32, reflect.Uint64:
			f.SetUint(uint64(i + 1))
		case reflect.Int64:
			f.SetInt(int64(i + 1))
		case reflect.Slice:
			f.SetBytes([]byte("value"))
		default:
			t.Fatalf("field %s of kind %s: teach this test to set it", v.Type().Field(i).Name, f.Kind())
		}
	}
	e := d.withoutValue()
	if !e.ejected || e.Value != nil || e.valueSize() != int64(len(d.Value)) {
		t.Fatalf("ejected copy: ejected %v, value %q, size %d", e.ejected, e.Value, e.valueSize())
	}
	r := e.withValue(d.Value)
	ev := reflect.ValueOf(r).Elem()
	for i := range v.NumField() {
		if !v.Type().Field(i).IsExported() {
			continue
		}
		if !reflect.DeepEqual(v.Field(i).Interface(), ev.Field(i).Interface()) {
			t.Errorf("field %s: %v after ejection and read-back, want %v", v.Type().Field(i).Name, ev.Field(i).Interface(), v.Field(i).Interface())
		}
	}
	if r.ejected || r.valueSize() != int64(len(d.Value)) {
		t.Errorf("read-back copy: ejected %v, size %d", r.ejected, r.valueSize())
	}
}

// failingReads is a store whose reads by key (one or many) fail while
// fail is set.
type failingReads struct {
	storage
	fail atomic.Bool
}

func (f *failingReads) doc(k docKey) (*Document, error) {
	if f.fail.Load() {
		return nil, errors.New("injected read failure")
	}
	return f.storage.doc(k)
}

func (f *failingReads) docs(keys []docKey) ([]*Document, error) {
	if f.fail.Load() {
		return nil, errors.New("injected read failure")
	}
	return f.storage.docs(keys)
}

// A value that cannot be read back from the store is an error (ErrStorage)
// for a read, and ends a change-feed read before the version, which the
// next read, once the store reads again, yields: nothing is skipped.
func TestEjectedValueReadFailure(t *testing.T) {
	ctx := context.Background()
	eng, err := Open(t.TempDir(), &Options{NumPartitions: 4, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	b, err := eng.CreateBucket(ctx, DefaultBucketSettings("b"))
	if err != nil {
		t.Fatal(err)
	}
	fr := &failingReads{storage: b.store.st}
	b.store.st = fr // before any write: the flusher has not read it yet
	c := b.DefaultCollection()
	const n = 40
	for i := range n {
		if _, err := c.Upsert(ctx, fmt.Sprint("k", i), []byte(fmt.Sprintf(`{"i":%d}`, i)), nil); err != nil {
			t.Fatal(err)
		}
	}
	var all []*Document
	for _, p := range b.parts {
		p.mu.RLock()
		p.mu.docs.each(func(i uint32) bool {
			all = append(all, p.mu.docs.doc(i))
			return true
		})
		p.mu.RUnlock()
	}
	for _, d := range all {
		if !ejectDoc(b, d) {
			t.Fatalf("%s not ejected", d.Key)
		}
	}

	fr.fail.Store(true)
	if _, err := c.Get(ctx, "k1"); !errors.Is(err, ErrStorage) {
		t.Errorf("Get of an ejected value the store cannot read: %v, want ErrStorage", err)
	}
	if _, _, err := b.Changes(nil, 0); !errors.Is(err, ErrStorage) {
		t.Errorf("Changes: %v, want ErrStorage", err)
	}
	cur, err := b.Consumer("t").Changes(nil)
	if err != nil {
		t.Fatal(err)
	}
	for d := range cur.Next(0) {
		t.Fatalf("cursor yielded %s while the store fails", d.Key)
	}
	if !errors.Is(cur.Err(), ErrStorage) {
		t.Fatalf("cursor error %v, want ErrStorage", cur.Err())
	}
	scan := ChangeScan{Part: int(all[0].Partition), Hi: b.MaxCAS(), Limit: n}
	b.ScanChanges(&scan)
	if !errors.Is(scan.Err, ErrStorage) || len(scan.Docs) != 0 || !scan.More {
		t.Fatalf("ScanChanges: err %v, %d documents, more %v", scan.Err, len(scan.Docs), scan.More)
	}

	fr.fail.Store(false)
	seen := map[string]bool{}
	for d := range cur.Next(0) {
		if want := fmt.Sprintf(`{"i":%s}`, d.Key[1:]); string(d.Value) != want {
			t.Errorf("cursor: %s = %q, want %q", d.Key, d.Value, want)
		}
		seen[d.Key] = true
	}
	if cur.Err() != nil || len(seen) != n {
		t.Errorf("cursor once the store reads again: %d of %d documents, %v", len(seen), n, cur.Err())
	}
	b.ScanChanges(&scan)
	if scan.Err != nil || len(scan.Docs) == 0 {
		t.Errorf("ScanChanges once the store reads again: %d documents, %v", len(scan.Docs), scan.Err)
	}
	for _, d := range scan.Docs {
		if d.ejected || len(d.Value) == 0 {
			t.Errorf("ScanChanges: %s without its value", d.Key)
		}
	}
	if err := b.Check(ctx); err != nil {
		t.Error(err)
	}
}

// ejectDoc ejects d's value if d is still its key's committed version.
func ejectDoc(b *Bucket, d *Document) bool {
	p := b.parts[d.Partition]
	p.mu.Lock()
	defer p.mu.Unlock()
	i, ok := p.mu.docs.find(docKey{cid: d.Collection, key: d.Key})
	return ok && p.mu.docs.same(i, d) && b.ejectLocked(p, i)
}
