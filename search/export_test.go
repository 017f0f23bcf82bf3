package search

// ReplacedRetries counts the searches s ran again on an index that replaced
// the one they used (see Service.Search).
func ReplacedRetries(s *Service) int64 { return s.replacedRetries.Load() }
