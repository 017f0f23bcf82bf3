package main

import (
	"encoding/json"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/mayflydb/mayfly/internal/leaktest"
)

// TestMain fails the package's tests if any goroutine they started is still
// running when they end (a progress bar's ticker, a build watch, a load's
// senders). bleve's analysis workers start with the package and live as
// long as the process. A stopping etcd member can leave one goroutine for
// good: etcd's bug, not ours (leaktest.EtcdStoppingMember).
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
	leaktest.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/blevesearch/bleve_index_api.AnalysisWorker"), leaktest.EtcdStoppingMember())
}

// mainArgsEnv names the environment variable that makes the test binary
// run mayfly (TestMain).
const mainArgsEnv = "MAYFLY_TEST_MAIN_ARGS"
