package search

import "context"

// ReplacedRetries counts the searches s ran again on an index that replaced
// the one they used (see Service.Search).
func ReplacedRetries(s *Service) int64 { return s.replacedRetries.Load() }

// SetApplyHook makes the indexes s starts from now on run hook before each
// batch they apply (nil: none).
func SetApplyHook(s *Service, hook func(ctx context.Context, index string) error) {
	s.hooks.apply = hook
}

// WaitMoved waits until the running index name has finished a move into
// place started in the background (see moveLater), if any.
func WaitMoved(s *Service, bucket, name string) error {
	ix, err := s.indexerFor(bucket, name)
	if err != nil {
		return err
	}
	ix.moving.Wait()
	return nil
}
