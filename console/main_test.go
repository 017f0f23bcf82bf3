package console_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/mayflydb/mayfly/internal/leaktest"
)

// TestMain fails the package's tests if any goroutine they started is still
// running when they end. The browser tests cancel their chromedp contexts,
// which ends the browser process and waits for it (ExecAllocator's Wait), so
// no goroutine of chromedp's or of the browser's is ignored. bleve's
// analysis workers (httpapi serves the search API, so importing it loads
// bleve) start with the process and live as long as it.
func TestMain(m *testing.M) {
	leaktest.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/blevesearch/bleve_index_api.AnalysisWorker"))
}
