package main

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine they started is still
// running when they end (a progress bar's ticker, a build watch, a load's
// senders). bleve's analysis workers start with the package and live as
// long as the process.
//
// With $MAYFLY_TEST_MAIN_ARGS (a JSON array of arguments) the test binary
// is mayfly itself, run with those arguments: a test that needs a server
// in its own process (its resident memory measured alone) starts one so.
func TestMain(m *testing.M) {
	if a := os.Getenv(mainArgsEnv); a != "" {
		var args []string
		if err := json.Unmarshal([]byte(a), &args); err != nil {
			panic(err)
		}
		os.Exit(runWith(os.Stdin, args, os.Stdout, os.Stderr))
	}
	code := m.Run()
	if code == 0 {
		ignore := goleak.IgnoreTopFunction("github.com/blevesearch/bleve_index_api.AnalysisWorker")
		deadline := time.Now().Add(leakWait)
		err := goleak.Find(ignore)
		for err != nil && time.Now().Before(deadline) {
			time.Sleep(200 * time.Millisecond)
			err = goleak.Find(ignore)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "goleak: goroutines still running %v after the tests: %v\n", leakWait, err)
			code = 1
		}
	}
	os.Exit(code)
}

// leakWait bounds the wait for the tests' goroutines to end (goleak's own
// retries last about 1.6 s): a cluster of serves (TestServeCluster) closes
// etcd members whose peer connections still busy at shutdown end only at
// etcd's 5 s peer read timeout, as in the cluster package's tests. A
// minute only catches a real leak.
const leakWait = time.Minute

// mainArgsEnv names the environment variable that makes the test binary
// run mayfly (TestMain).
const mainArgsEnv = "MAYFLY_TEST_MAIN_ARGS"
