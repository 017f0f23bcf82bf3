package chaostest

import (
	"context"
	"fmt"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// The partition case's key → partition is the engine's: else it would
// check the cut node's writes against partitions it did not lead.
func TestPartitionOfIsTheEngines(t *testing.T) {
	for _, n := range []int{16, 1024} {
		eng, err := engine.Open(t.TempDir(), &engine.Options{NumPartitions: n, NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		b, err := eng.CreateBucket(context.Background(), engine.DefaultBucketSettings("default"))
		if err != nil {
			t.Fatal(err)
		}
		for k := range keySpace + 100 {
			key := fmt.Sprintf("k%d", k)
			if got, want := partitionOf(key, n), b.PartitionOf(key); got != want {
				t.Errorf("partitionOf(%q, %d) = %d, the engine says %d", key, n, got, want)
			}
		}
		eng.Close()
	}
}

// lastLine finds the node's last cut line, whole lines only (a line
// being written is not read as said).
func TestLastLine(t *testing.T) {
	log := "=== start x\nchaos: Raft traffic cut from n2,n3\nother\nchaos: Raft traffic cut from nobody\nchaos: Raft traffic cut from n"
	if got := lastLine(log, "chaos: Raft traffic cut from "); got != "chaos: Raft traffic cut from nobody\n" {
		t.Errorf("lastLine = %q, want the heal line (the last complete one)", got)
	}
	if got := lastLine("no such line\n", "chaos: "); got != "" {
		t.Errorf("lastLine = %q, want none", got)
	}
}
