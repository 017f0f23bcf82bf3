package replica

import (
	"testing"

	"github.com/mayflydb/mayfly/internal/leaktest"
)

// TestMain checks that no goroutine outlives the tests, but for the one an
// embedded etcd member can leave behind as it stops
// (leaktest.EtcdStoppingMember: an etcd bug, not ours).
func TestMain(m *testing.M) { leaktest.VerifyTestMain(m, leaktest.EtcdStoppingMember()) }
