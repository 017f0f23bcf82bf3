package engine

// StorageBackend returns the store that keeps the bucket on disk, as
// Couchbase's storageBackend names its own (couchstore, magma):
// StoragePebble or StorageBolt for a couchbase bucket, "" for an ephemeral
// or memcached bucket, which keeps nothing on disk. A bucket keeps the store
// it was created with whatever Options.Storage says later.
func (b *Bucket) StorageBackend() string {
	switch b.store.st.(type) {
	case *pebbleStorage:
		return StoragePebble
	case *boltStorage:
		return StorageBolt
	}
	return ""
}
