package engine_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// TestFollowableLeader: a refusal naming the leader, given before anything
// was proposed (engine.NotMyVBucketError), is ErrNotMyVBucket and names
// the node to send the write to, however wrapped; one naming no leader,
// and any write whose outcome is unknown (ErrAmbiguous), whatever else
// its error holds, name none.
func TestFollowableLeader(t *testing.T) {
	moved := &engine.NotMyVBucketError{Partition: 7, Leader: "n2", Where: "http://h:8091"}
	if want := "engine: not my vbucket: partition 7 is led by node n2 at http://h:8091; send the request there"; moved.Error() != want {
		t.Fatalf("Error() = %q, want %q", moved.Error(), want)
	}
	for _, c := range []struct {
		err  error
		want string
	}{
		{moved, "n2"},
		{fmt.Errorf("upsert %q: %w", "k", moved), "n2"},
		{nil, ""},
		{engine.ErrNotMyVBucket, ""},
		{fmt.Errorf("%w: partition 7 has no leader at the moment", engine.ErrNotMyVBucket), ""},
		{&engine.NotMyVBucketError{Partition: 7}, ""},
		{fmt.Errorf("%w: partition 7: %w", engine.ErrAmbiguous, moved), ""},
		{engine.ErrTempFail, ""},
	} {
		if got := engine.FollowableLeader(c.err); got != c.want {
			t.Errorf("FollowableLeader(%v) = %q, want %q", c.err, got, c.want)
		}
	}
	if !errors.Is(fmt.Errorf("x: %w", moved), engine.ErrNotMyVBucket) {
		t.Error("a NotMyVBucketError is not ErrNotMyVBucket")
	}
}
