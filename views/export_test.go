package views

import "github.com/mayflydb/mayfly/engine"

// IndexPath exposes indexPath to the tests.
func IndexPath(b *engine.Bucket, ddocID string) string { return indexPath(b, ddocID) }

// HeldBuckets returns how many buckets the service holds state for.
func HeldBuckets(s *Service) int {
	sets, _ := s.reg.Sets()
	return len(sets)
}

// ReplacedRetries counts the queries s started again on a design document's
// new index (see Query.Run).
func ReplacedRetries(s *Service) int64 { return s.replacedRetries.Load() }

// SetRenameHook makes s move index files with rename (nil: os.Rename).
func SetRenameHook(s *Service, rename func(oldpath, newpath string) error) { s.hooks.rename = rename }

// SetStoreHook makes s run store before it stores a design document; its
// error fails the store (nil: none).
func SetStoreHook(s *Service, store func() error) { s.hooks.store = store }
