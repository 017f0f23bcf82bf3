package replica

import (
	"testing"

	"github.com/mayflydb/mayfly/internal/leaktest"
)

func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }
