//go:build chaos

package main

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/pflag"

	"github.com/mayflydb/mayfly/replica"
)

// cutPoll is how often, at most, the cut file is read again (on a frame's
// way: a node with no Raft traffic reads nothing, and needs nothing cut).
const cutPoll = 100 * time.Millisecond

// faultConfig is the fault injection of a binary built with -tags chaos
// (the cluster chaos test's, internal/chaostest): --chaos-cut-file names a
// file listing the peers (node names, separated by commas or white space)
// whose Raft traffic this node drops, in both directions, while its
// connections stay open: a network partition of the Raft traffic only
// (etcd's is not cut, so the node keeps its lease). An empty or missing
// file cuts nothing. A flag and a file rather than an admin endpoint: the
// switch then needs no HTTP route, credentials or listener of its own, and
// works the same while the node's HTTP port is busy; the harness knows each
// node's directory already.
type faultConfig struct {
	cutFile string
}

func (f *faultConfig) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.cutFile, "chaos-cut-file", "", "chaos builds only: a file naming the peers whose Raft traffic this node drops (re-read every 100 ms; empty or missing: none)")
}

// cut is replica.Options.FaultCut for the flags: nil without
// --chaos-cut-file.
func (f *faultConfig) cut() func(peer uint64) bool {
	if f.cutFile == "" {
		return nil
	}
	c := &fileCut{path: f.cutFile}
	c.reload()
	c.next.Store(time.Now().Add(cutPoll).UnixNano()) // wall clock: the cut file's polling
	return c.isCut
}

// fileCut is the set of cut peers read from a file, read again at most
// every cutPoll by whichever frame finds the time past.
type fileCut struct {
	path string
	next atomic.Int64 // Unix ns from which the file is read again
	set  atomic.Pointer[map[uint64]bool]

	mu   sync.Mutex
	last string // the names last read, as logged
}

func (c *fileCut) isCut(peer uint64) bool {
	now := time.Now().UnixNano() // wall clock: the cut file's polling
	if n := c.next.Load(); now >= n && c.next.CompareAndSwap(n, now+int64(cutPoll)) {
		c.reload()
	}
	return (*c.set.Load())[peer]
}

// reload reads the file, and says on stderr when the set changed (the
// harness waits for that line: the cut took effect).
func (c *fileCut) reload() {
	b, err := os.ReadFile(c.path)
	if err != nil && !os.IsNotExist(err) {
		fmt.Fprintf(os.Stderr, "chaos: reading %s: %v (the cut is unchanged)\n", c.path, err)
		return
	}
	names := strings.FieldsFunc(string(b), func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' || r == '\r' })
	slices.Sort(names)
	names = slices.Compact(names)
	set := make(map[uint64]bool, len(names))
	for _, n := range names {
		set[replica.NodeID(n)] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.set.Store(&set)
	if now := strings.Join(names, ","); now != c.last {
		c.last = now
		if now == "" {
			fmt.Fprintf(os.Stderr, "chaos: Raft traffic cut from nobody\n")
		} else {
			fmt.Fprintf(os.Stderr, "chaos: Raft traffic cut from %s\n", now)
		}
	}
}
