package engine

// HoldCommits keeps the bucket's flusher from committing until release is
// called, by holding bbolt's writer lock with an open write transaction, so
// that a test can look at a write that is queued but not yet on disk.
func HoldCommits(b *Bucket) (release func(), err error) {
	tx, err := b.store.db.Begin(true)
	if err != nil {
		return nil, err
	}
	return func() { tx.Rollback() }, nil
}
