package replica

import (
	"context"
	"errors"
	"hash/fnv"
	"testing"
	"time"
)

// RemoveGroups stops a group on every node and deletes all the store held
// of it: after a restart nothing of it is loaded, its machine's keys are
// gone, and the same id added again starts a new group from nothing (a
// deleted bucket's entries never come back), while the other groups go on.
func TestRemoveGroupsDeletesState(t *testing.T) {
	c := newTestCluster(t, 4, nil, false)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for g := range GroupID(2) {
		if _, err := c.propose(ctx, "n1", g, "old=1"); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range testNodes {
		eventually(t, n+" applies group 0's entry", func() error {
			if v, ok := c.sm(n, 0).get("old"); !ok || v != "1" {
				return errors.New("not applied yet")
			}
			return nil
		})
	}
	for _, n := range testNodes {
		if err := c.host(n).RemoveGroups(ctx, []GroupID{0, 99}); err != nil { // 99: never held
			t.Fatalf("%s: %v", n, err)
		}
	}
	for _, n := range testNodes {
		h := c.host(n)
		if _, err := h.Propose(ctx, 0, []byte("x=1")); !errors.Is(err, ErrNoGroup) {
			t.Errorf("%s: a proposal to a removed group: %v, want ErrNoGroup", n, err)
		}
		if _, found, err := h.st.load(0); err != nil || found {
			t.Errorf("%s: the store still holds the removed group (found %v, err %v)", n, found, err)
		}
		keys := 0
		if err := h.ScanMachine(0, func(k, v []byte) error { keys++; return nil }); err != nil || keys != 0 {
			t.Errorf("%s: the removed group's machine keys: %d (err %v)", n, keys, err)
		}
		if _, found, _ := h.st.load(1); !found {
			t.Errorf("%s: group 1 was removed with group 0", n)
		}
	}
	if _, err := c.propose(ctx, "n2", 1, "after=1"); err != nil {
		t.Fatalf("group 1 after group 0's removal: %v", err)
	}

	// Restarted, every node holds nothing of group 0; added again, it is a
	// new group: its log starts afresh and its machine lacks "old".
	for _, n := range testNodes {
		c.stop(n)
		c.start(n) // adds group 0 again with a machine loaded from the store
	}
	for _, n := range testNodes {
		if _, ok := c.sm(n, 0).get("old"); ok {
			t.Errorf("%s: the removed group's key came back after a restart", n)
		}
	}
	res, err := c.propose(ctx, "n3", 0, "new=1")
	if err != nil {
		t.Fatal(err)
	}
	if res.Index > 3 {
		t.Errorf("the re-added group's first entry is at index %d: its old log was kept", res.Index)
	}
	for _, n := range testNodes {
		eventually(t, n+" applies the new group's entry", func() error {
			if _, ok := c.sm(n, 0).get("new"); !ok {
				return errors.New("not applied yet")
			}
			return nil
		})
		if _, ok := c.sm(n, 0).get("old"); ok {
			t.Errorf("%s: the new group holds the removed group's key", n)
		}
	}
}

// A bucket created again under the same name (another definition UUID)
// gets other groups for every partition; a bucket without a UUID keeps
// the groups it had before buckets had one (the name's hash alone).
func TestBucketGroupIncarnations(t *testing.T) {
	h := fnv.New64a()
	h.Write([]byte("b"))
	if got, want := BucketGroup("b", "", 5), GroupID(h.Sum64()&^0xffff|5); got != want {
		t.Errorf("BucketGroup without a UUID = %x, want the name's hash %x", got, want)
	}
	old, renewed := BucketGroups("b", "u1", 1024), BucketGroups("b", "u2", 1024)
	oldSet := map[GroupID]bool{}
	for p, id := range old {
		if int(id&0xffff) != p {
			t.Fatalf("partition %d's group %x lacks the partition in its low bits", p, id)
		}
		oldSet[id] = true
	}
	for p, id := range renewed {
		if oldSet[id] {
			t.Fatalf("partition %d of the new incarnation has an old incarnation's group %x", p, id)
		}
	}
}
