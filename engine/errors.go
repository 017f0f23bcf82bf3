package engine

import (
	"errors"
	"fmt"
)

var (
	// ErrNotFound is returned when a document is missing, deleted or expired.
	ErrNotFound = errors.New("engine: document not found")
	// ErrExpired is returned by a read that found the document expired (and
	// deleted it, lazily). It wraps ErrNotFound: errors.Is(err, ErrNotFound)
	// holds too.
	ErrExpired = fmt.Errorf("%w: expired", ErrNotFound)
	// ErrKeyExists is returned by Insert when the key already holds a live document.
	ErrKeyExists = errors.New("engine: document already exists")
	// ErrCASMismatch is returned when a write's CAS does not match the document's.
	ErrCASMismatch = errors.New("engine: cas mismatch")
	// ErrLocked is returned by a write to a locked document without the
	// lock CAS, by GetLocked on a locked document, and by Unlock with a
	// wrong CAS (Couchbase's LOCKED).
	ErrLocked = errors.New("engine: document locked")
	// ErrNotLocked is returned by Unlock on a document no lock holds
	// (Couchbase's NOT_LOCKED).
	ErrNotLocked = errors.New("engine: document not locked")
	// ErrInvalidKey is returned for an empty key, a key over MaxKeyLen bytes, or a
	// key that is not valid UTF-8.
	ErrInvalidKey = errors.New("engine: invalid key")
	// ErrValueTooLarge is returned for a value over MaxValueLen bytes.
	ErrValueTooLarge = errors.New("engine: value too large")
	// ErrBucketNotFound is returned when no bucket has the given name.
	ErrBucketNotFound = errors.New("engine: bucket not found")
	// ErrBucketExists is returned when creating a bucket whose name is taken.
	ErrBucketExists = errors.New("engine: bucket already exists")
	// ErrScopeNotFound is returned when no scope has the given name.
	ErrScopeNotFound = errors.New("engine: scope not found")
	// ErrScopeExists is returned when creating a scope whose name is taken.
	ErrScopeExists = errors.New("engine: scope already exists")
	// ErrCollectionNotFound is returned when no collection has the given name.
	ErrCollectionNotFound = errors.New("engine: collection not found")
	// ErrCollectionExists is returned when creating a collection whose name is taken.
	ErrCollectionExists = errors.New("engine: collection already exists")
	// ErrInvalidSetting is returned for a bucket, scope or collection setting out
	// of range; the wrapping error names the setting.
	ErrInvalidSetting = errors.New("engine: invalid setting")
	// ErrStorage is returned by a write that could not be made durable (a
	// full or failing disk), and by every write to the bucket after it until
	// the disk takes writes again. The error wraps the cause too, so
	// errors.Is(err, syscall.ENOSPC) tells a full disk. Nothing of a failed
	// write is ever visible.
	ErrStorage = errors.New("engine: storage failed")
	// ErrNewerFormat is returned by Open for a data directory a newer
	// version of Mayfly wrote in a format this one does not read.
	ErrNewerFormat = errors.New("engine: data directory of a newer format")
	// ErrBucketFilesMissing is returned by Open when the catalog lists a
	// persistent bucket whose folder is gone (deleted, or on a volume not
	// mounted): opening it would start it empty in its place.
	ErrBucketFilesMissing = errors.New("engine: a bucket's files are missing")
	// ErrInvalidOp is returned for a batch operation of no known kind, or
	// without what its kind needs (Collection.Apply).
	ErrInvalidOp = errors.New("engine: invalid operation")
	// ErrTempOOM is returned by a write that would take an ephemeral
	// bucket with evictionPolicy noEviction past its memory quota: a
	// temporary error (503 over HTTP, "SERVER_ERROR out of memory storing
	// object" on the memcached port); nothing stored is lost, and the write
	// may succeed once deletes have made room.
	ErrTempOOM = errors.New("engine: out of memory")
	// ErrWouldBlock is returned by a read asked to answer from memory alone
	// (Collection.GetResident) when the answer needs the store: a value
	// ejected from memory, or a key the warm-up has not loaded yet. Nothing
	// was read or changed; Get answers it.
	ErrWouldBlock = errors.New("engine: the read needs the store")
	// ErrClosed is returned by operations on a closed engine or bucket.
	ErrClosed = errors.New("engine: closed")
)

// ExpiredError is the error of a read that found its document expired (and
// purged it lazily). errors.Is(err, ErrExpired) and errors.Is(err,
// ErrNotFound) both hold; errors.As gives the expired version.
type ExpiredError struct {
	// Doc is the document as it was when found expired: its metadata,
	// and its value when that was in memory (an expired value that had
	// left memory is not read back: Value is nil).
	Doc *Document
}

func (e *ExpiredError) Error() string { return ErrExpired.Error() + ": " + e.Doc.Key }

// Unwrap returns ErrExpired.
func (e *ExpiredError) Unwrap() error { return ErrExpired }

// errTempOOM is the error of a write refused by bucket's quota (bytes).
func errTempOOM(bucket string, quota int64) error {
	return fmt.Errorf("%w: bucket %s is at its memory quota (%d MiB) and its evictionPolicy is noEviction; delete documents or raise ramQuotaMB", ErrTempOOM, bucket, quota>>20)
}
