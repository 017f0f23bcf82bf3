package search_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/mayflydb/mayfly/internal/leaktest"
)

// TestMain fails the package's tests if any goroutine they started is still
// running when they end. bleve's analysis workers start with the package and
// live as long as the process.
func TestMain(m *testing.M) {
	leaktest.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/blevesearch/bleve_index_api.AnalysisWorker"))
}
