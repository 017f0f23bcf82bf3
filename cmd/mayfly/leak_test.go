package main

import (
	"encoding/json"
	"flag"
	"os"
	"runtime"
	"strconv"
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
// is mayfly itself, run with those arguments: serverCommand starts a test's
// server processes so when the tests are not race-built (or with
// MAYFLY_TEST_RACE_NODES=1; else from a build without the race detector,
// nodebin_test.go).
//
// Unless -test.parallel is given, clusterParallel of the package's
// parallel tests run at once (at least GOMAXPROCS, go test's default):
// they are the cluster tests, each mostly waiting on its server processes'
// elections, leases and failover timeouts (one alone keeps a quarter of a
// 2-core machine busy), so on 2 cores two at a time left the package's
// longest stretch waiting.
func TestMain(m *testing.M) {
	if a := os.Getenv(mainArgsEnv); a != "" {
		var args []string
		if err := json.Unmarshal([]byte(a), &args); err != nil {
			panic(err)
		}
		os.Exit(runWith(os.Stdin, args, os.Stdout, os.Stderr))
	}
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		if err := flag.Set("test.parallel", strconv.Itoa(max(clusterParallel, runtime.GOMAXPROCS(0)))); err != nil {
			panic(err)
		}
	}
	os.Exit(leaktest.Run(m, goleak.IgnoreTopFunction("github.com/blevesearch/bleve_index_api.AnalysisWorker"), leaktest.EtcdStoppingMember()))
}

// clusterParallel is how many of the package's parallel tests run at once
// unless -test.parallel says (TestMain). Four at once (twelve race-built
// nodes beside make test's other packages) kept the run queue at 29-37 on
// 2 cores, where a partition could stay without a leader for minutes.
const clusterParallel = 3

// mainArgsEnv names the environment variable that makes the test binary
// run mayfly (TestMain).
const mainArgsEnv = "MAYFLY_TEST_MAIN_ARGS"
