package cluster

import (
	"testing"

	"github.com/mayflydb/mayfly/internal/leaktest"
)

// TestMain checks that no goroutine outlives the tests: a node's Close
// stops its loops, its client and its etcd member. (etcd gives a member's
// peer server a second to shut down and then leaves the connections still
// busy open: such a connection between two of the tests' members ends only
// at etcd's 5 s peer read timeout; leaktest waits for it.) The one goroutine
// a stopping member can leave for good is etcd's bug, not ours
// (leaktest.EtcdStoppingMember).
func TestMain(m *testing.M) { leaktest.VerifyTestMain(m, leaktest.EtcdStoppingMember()) }
