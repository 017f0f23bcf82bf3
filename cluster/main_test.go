package cluster

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// leakWait bounds the wait for the tests' goroutines to end. etcd gives a
// member's peer server a second to shut down and then leaves the
// connections still busy open: such a connection between two of the
// tests' members ends only at etcd's 5 s peer read timeout (its
// connections renew their read deadline on every read, so net/http cannot
// abort the read). A minute only catches a real leak.
const leakWait = time.Minute

// TestMain checks that no goroutine outlives the tests: a node's Close
// stops its loops, its client and its etcd member.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		deadline := time.Now().Add(leakWait)
		err := goleak.Find()
		for err != nil && time.Now().Before(deadline) {
			time.Sleep(200 * time.Millisecond)
			err = goleak.Find()
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "goleak: goroutines still running %v after the tests: %v\n", leakWait, err)
			code = 1
		}
	}
	os.Exit(code)
}
