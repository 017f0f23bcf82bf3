package kv

import (
	"fmt"
	"testing"

	"github.com/couchbase/gocbcore/v10/memd"

	"github.com/mayflydb/mayfly/engine"
)

// A cluster's write sent to a node that does not lead its partition
// answers NOT_MY_VBUCKET, as Couchbase's data service does, and a
// replication failure whose outcome is unknown a temporary failure.
func TestStatusOfReplicationErrors(t *testing.T) {
	for _, c := range []struct {
		err  error
		want memd.StatusCode
	}{
		{fmt.Errorf("%w: partition 3 is led by node n2", engine.ErrNotMyVBucket), memd.StatusNotMyVBucket},
		{fmt.Errorf("%w: partition 3: busy", engine.ErrTempFail), memd.StatusTmpFail},
	} {
		if st, reason := statusOf(c.err); st != c.want || reason == "" {
			t.Errorf("%v: status %v %q, want %v", c.err, st, reason, c.want)
		}
	}
}
