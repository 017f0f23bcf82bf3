package pager

import (
	"testing"

	"github.com/mayflydb/mayfly/internal/leaktest"
)

// TestMain fails the package's tests if any goroutine they started is still
// running when they end.
func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }
