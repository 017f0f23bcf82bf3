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
