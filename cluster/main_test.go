package cluster

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no goroutine outlives the tests: a node's Close
// stops its loops, its client and its etcd member.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
