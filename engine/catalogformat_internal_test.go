package engine

import (
	"encoding/binary"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// A data directory whose catalog a newer Mayfly wrote, in a format this one
// does not read, is refused at Open with an error naming what to do; its
// catalog is left as it was. A catalog written before the format was
// recorded opens as format 1 and is marked so.
func TestOpenRefusesNewerCatalogFormat(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, catalogFile)
	setFormat := func(v []byte) {
		t.Helper()
		db, err := bolt.Open(path, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		err = db.Update(func(tx *bolt.Tx) error {
			if _, err := tx.CreateBucketIfNotExists(bktBuckets); err != nil {
				return err
			}
			if v == nil {
				return tx.DeleteBucket(bktCatalogMeta)
			}
			meta, err := tx.CreateBucketIfNotExists(bktCatalogMeta)
			if err != nil {
				return err
			}
			return meta.Put(catalogFormatKey, v)
		})
		if err != nil && !errors.Is(err, bolt.ErrBucketNotFound) {
			t.Fatal(err)
		}
	}
	format := func() []byte {
		t.Helper()
		db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var v []byte
		db.View(func(tx *bolt.Tx) error {
			if b := tx.Bucket(bktCatalogMeta); b != nil {
				v = append([]byte(nil), b.Get(catalogFormatKey)...)
			}
			return nil
		})
		return v
	}

	newer := binary.BigEndian.AppendUint32(nil, catalogFormat+1)
	setFormat(newer)
	_, err := Open(dir, &Options{NumPartitions: 4})
	if !errors.Is(err, ErrNewerFormat) || !strings.Contains(err.Error(), "newer Mayfly") || strings.Contains(err.Error(), "another server") {
		t.Fatalf("open of a newer data directory: %v", err)
	}
	if got := format(); string(got) != string(newer) {
		t.Errorf("the refused catalog's format is now %x", got)
	}

	setFormat(nil) // as written before the format was recorded
	e, err := Open(dir, &Options{NumPartitions: 4})
	if err != nil {
		t.Fatalf("open of a catalog without a format: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if got := format(); len(got) != 4 || binary.BigEndian.Uint32(got) != catalogFormat {
		t.Errorf("format recorded at open: %x, want %d", got, catalogFormat)
	}
}

// A first start that did not reach EndFirstStart (it failed, or was killed,
// after the catalog was made: before its default bucket was) is a first
// start again at the next Open; once ended, no longer. A catalog written
// before the mark existed is past its first start.
func TestFirstStartSurvivesAnUnfinishedStart(t *testing.T) {
	dir := t.TempDir()
	open := func() *Engine {
		t.Helper()
		e, err := Open(dir, &Options{NumPartitions: 4})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	e := open()
	if !e.FirstStart() {
		t.Fatal("a new data directory is not in its first start")
	}
	if err := e.Close(); err != nil { // the start ends here, unfinished
		t.Fatal(err)
	}
	e = open()
	if !e.FirstStart() {
		t.Fatal("after a first start that did not end, the next start is not a first start: its default bucket would never be made")
	}
	if err := e.EndFirstStart(); err != nil {
		t.Fatal(err)
	}
	if e.FirstStart() {
		t.Error("FirstStart after EndFirstStart")
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = open()
	if e.FirstStart() {
		t.Error("a data directory whose first start ended is in its first start again")
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	// A catalog of an earlier version: its buckets, no mark.
	old := t.TempDir()
	db, err := bolt.Open(filepath.Join(old, catalogFile), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket(bktBuckets); return err }); err != nil {
		t.Fatal(err)
	}
	db.Close()
	e, err = Open(old, &Options{NumPartitions: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if e.FirstStart() {
		t.Error("a data directory of an earlier version is in its first start")
	}
}
