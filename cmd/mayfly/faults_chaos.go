//go:build chaos

package main

import (
	"encoding/json"
	"fmt"
	"net/http"
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

// progressPath is a chaos build's read of its groups' progress
// (faultConfig.handler): progressPath + BUCKET.
const progressPath = "/_chaos/progress/"

// partitionProgress is one partition's group on this node, as
// progressPath answers it.
type partitionProgress struct {
	Partition int    `json:"p"`
	Leader    string `json:"leader,omitempty"`
	Leading   bool   `json:"leading,omitempty"`
	Term      uint64 `json:"term"`
	Commit    uint64 `json:"commit"`
	Applied   uint64 `json:"applied"`
}

// handler serves api and, in a chaos build of a cluster node (rt not
// nil), GET progressPath+BUCKET: for each partition of the bucket whose
// Raft group runs on this node, its leader as this node sees it, term,
// commit and applied index (replica.Host.Progress), read from the node
// itself rather than through etcd, so that the chaos harness times a
// healed node's catch-up from the groups' own progress. No
// authentication: a test build's read of positions, on the test's own
// network.
func (f *faultConfig) handler(api http.Handler, rt *router) http.Handler {
	if rt == nil {
		return api
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		name, ok := strings.CutPrefix(req.URL.Path, progressPath)
		if !ok {
			api.ServeHTTP(w, req)
			return
		}
		if req.Method != http.MethodGet {
			http.Error(w, "GET only", http.StatusMethodNotAllowed)
			return
		}
		b, err := rt.eng.Bucket(name)
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		ids := replica.BucketGroups(b.Name(), b.Settings().UUID, b.NumPartitions())
		part := make(map[replica.GroupID]int, len(ids))
		for p, id := range ids {
			part[id] = p
		}
		out := []partitionProgress{}
		for _, g := range rt.h.Progress(ids) {
			out = append(out, partitionProgress{Partition: part[g.Group], Leader: g.Leader, Leading: g.Leading,
				Term: g.Term, Commit: g.Commit, Applied: g.Applied})
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(out)
	})
}
