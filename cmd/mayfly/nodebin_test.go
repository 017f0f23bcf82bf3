package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/mayflydb/mayfly/internal/mayflybin"
	"github.com/mayflydb/mayfly/internal/racebuild"
)

// The tests' server processes (procNode, and the idle resident memory
// test's) run mayfly built from this package without the race detector,
// built once per test binary, when the tests are race-built: three or four
// race-built server processes a cluster test, beside make test's other
// packages, were most of this package's CPU (each process 5-10 times its
// own), and they needed longer ticks and timeouts. The race detector still
// runs in the test process, and in every node of the in-process cluster
// tests (cluster, replica, and serve run in this process).
//
// With MAYFLY_TEST_RACE_NODES=1 the processes run this race-built test
// binary itself, and a race report in a node's output fails its test:
// make test's race-more step runs TestReplicatedClusterSurvivesKill so.
const raceNodesEnv = "MAYFLY_TEST_RACE_NODES"

// nodeBinary builds mayfly from this package without the race detector,
// once a test binary (mayflybin.Build: linked again only when the source
// changed), with the test binary's fault injection (nodeTags: a chaos
// build's processes take --chaos-cut-file).
var nodeBinary = sync.OnceValues(func() (string, error) {
	return mayflybin.Build(nodeTags()...)
})

// raceNodes reports whether the server processes run race-built (the test
// binary itself, under go test -race with MAYFLY_TEST_RACE_NODES=1).
func raceNodes() bool {
	return racebuild.Enabled && os.Getenv(raceNodesEnv) == "1"
}

// serverCommand returns the command that runs mayfly with args in a
// process of its own: this test binary (TestMain runs mayfly when
// mainArgsEnv is set) when it is not race-built or raceNodes says so, else
// the build of nodeBinary.
func serverCommand(t *testing.T, args []string) *exec.Cmd {
	t.Helper()
	if !racebuild.Enabled || raceNodes() {
		a, _ := json.Marshal(args)
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), mainArgsEnv+"="+string(a))
		return cmd
	}
	bin, err := nodeBinary()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = os.Environ()
	return cmd
}

// raceReported fails t when out holds a race detector's report (a
// race-built server process writes it to its output and goes on).
func raceReported(t *testing.T, name, out string) {
	t.Helper()
	if i := strings.Index(out, "WARNING: DATA RACE"); i >= 0 {
		t.Errorf("%s reported a data race:\n%s", name, out[i:min(len(out), i+8000)])
	}
}
