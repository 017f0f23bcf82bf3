package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// TestOldLazyExpirationLoads: a data directory written when expirations were
// made durable lazily (the file holds the document's live, expired record
// and its expiry entry; only the partition's sequence number and the CAS
// moved) still opens: the document is expired and unpurged once, the next
// pager run purges it with a new sequence number, and that purge survives
// the next restart.
func TestOldLazyExpirationLoads(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	clk := NewFakeClock(1_700_000_000)
	open := func() (*Engine, *Bucket) {
		t.Helper()
		eng, err := Open(dir, &Options{Clock: clk, NumPartitions: 8, NoSync: true, Storage: StorageBolt}) // the old file it rewrites is a bbolt one
		if err != nil {
			t.Fatal(err)
		}
		b, err := eng.Bucket("b")
		if err != nil {
			if b, err = eng.CreateBucket(ctx, BucketSettings{Name: "b", Type: Couchbase}); err != nil {
				t.Fatal(err)
			}
		}
		return eng, b
	}
	closeEng := func(eng *Engine) {
		t.Helper()
		if err := eng.Check(ctx); err != nil {
			t.Error(err)
		}
		if err := eng.Close(); err != nil {
			t.Fatal(err)
		}
	}
	eng, b := open()
	d, err := b.DefaultCollection().Upsert(ctx, "old", []byte(`{}`), &WriteOptions{Expiry: 10})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(eng.bucketDir("b"), boltFile)
	closeEng(eng)

	// What the old pager run left: the partition's sequence number and the
	// CAS of the expiration, nothing else.
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bktVBSeq).Put(binary.BigEndian.AppendUint16(nil, d.Partition), binary.BigEndian.AppendUint64(nil, d.Seq+1)); err != nil {
			return err
		}
		return tx.Bucket(bktMeta).Put(metaCAS, binary.BigEndian.AppendUint64(nil, d.CAS+1))
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}

	clk.Advance(10)
	eng, b = open()
	if st := b.Stats(); st.CurrItems != 1 || st.ExpiredUnpurged != 1 {
		t.Fatalf("old lazily persisted expiration after the upgrade: %+v, want it expired and unpurged", st)
	}
	if err := eng.Check(ctx); err != nil {
		t.Fatalf("Check of an old data directory: %v", err)
	}
	if n, _, err := b.ExpireBatch(ctx, 10); err != nil || n != 1 {
		t.Fatalf("pager: %d, %v", n, err)
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if seq := b.HighSeqnos()[d.Partition]; seq != d.Seq+2 {
		t.Fatalf("the purge took sequence number %d, want %d (after the old expiration's)", seq, d.Seq+2)
	}
	closeEng(eng)

	eng, b = open()
	defer closeEng(eng)
	if st := b.Stats(); st.CurrItems != 0 || st.ExpiredUnpurged != 0 || st.Tombstones != 1 {
		t.Fatalf("after the purge and a restart: %+v", st)
	}
	if _, err := b.DefaultCollection().Get(ctx, "old"); !errors.Is(err, ErrNotFound) || errors.Is(err, ErrExpired) {
		t.Fatalf("Get after the purge and a restart: %v, want not found, not expired", err)
	}
	feed, _, err := b.Changes(nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(feed) != 1 || !feed[0].Deleted || !feed[0].Expired || feed[0].Seq != d.Seq+2 || feed[0].Expiration != d.Expiration {
		t.Fatalf("change feed after the purge and a restart: %+v", feed)
	}
}
