package cluster

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// The status lists the partitions no node up reports leading: a group
// still electing (the cluster just formed, or its leader died) answers
// writes with "retry shortly" although no partition is degraded. A record
// of a node down counts for nothing; a partition claimed again is no
// longer listed.
func TestLeaderlessInStatus(t *testing.T) {
	ctx := context.Background()
	nodes := startAll(t, ctx, []Config{testConfig(t, testPeers(t, 1), "n1", t.TempDir(), &syncLog{})})
	defer closeAll(nodes)
	cli := nodes[0].Client()
	if err := DefineBucket(ctx, cli, BucketDef{BucketSettings: engine.BucketSettings{Name: "b", UUID: "u-b", NumVBuckets: 16, ReplicaNumber: engine.Replicas(0)}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the bucket placed", func() (bool, string) {
		m, _, err := ReadMap(ctx, cli, "b")
		return err == nil && m != nil, fmt.Sprint(err)
	})
	status := func() (BucketStatus, string) {
		t.Helper()
		s, err := ReadStatus(ctx, cli, nil)
		if err != nil {
			t.Fatal(err)
		}
		bs, ok := s.Bucket("b")
		if !ok {
			t.Fatal("no bucket b in the status")
		}
		var text strings.Builder
		if err := s.WriteText(&text); err != nil {
			t.Fatal(err)
		}
		return bs, text.String()
	}
	if bs, _ := status(); len(bs.Leaderless) != 16 || len(bs.Degraded) != 0 {
		t.Fatalf("before any report: leaderless %v, degraded %v; want all 16 leaderless, none degraded", bs.Leaderless, bs.Degraded)
	}

	var led []int
	for p := range 16 {
		if p != 3 && p != 4 && p != 11 {
			led = append(led, p)
		}
	}
	if _, err := PublishLeads(ctx, cli, "b", "u-b", "n1", led); err != nil {
		t.Fatal(err)
	}
	if _, err := PublishLeads(ctx, cli, "b", "u-b", "gone", []int{3}); err != nil { // not up
		t.Fatal(err)
	}
	if _, err := PublishLeads(ctx, cli, "b", "u-old", "n1", []int{11}); err != nil { // another incarnation: replaces n1's record
		t.Fatal(err)
	}
	bs, text := status()
	if !slices.Equal(bs.Leaderless, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}) {
		t.Fatalf("after a record of another incarnation: leaderless %v, want all 16", bs.Leaderless)
	}
	if _, err := PublishLeads(ctx, cli, "b", "u-b", "n1", led); err != nil {
		t.Fatal(err)
	}
	bs, text = status()
	if !slices.Equal(bs.Leaderless, []int{3, 4, 11}) {
		t.Fatalf("leaderless %v, want [3 4 11]", bs.Leaderless)
	}
	if want := "in 3 partitions: 3-4,11"; !strings.Contains(text, "no leader yet") || !strings.Contains(text, want) {
		t.Fatalf("status text lacks the leaderless partitions (%q):\n%s", want, text)
	}
	// The map prefers n1 for all 16; its groups lead 13 of them now, and
	// the status says so beside the map's count (a node "gone", not up,
	// counts for nothing).
	if bs.Leads["n1"] != 16 || bs.Leading["n1"] != 13 || bs.Leading["gone"] != 0 {
		t.Fatalf("leads %v, leading %v; want n1 preferred for 16 and leading 13", bs.Leads, bs.Leading)
	}
	// (The line has "views cover" between them once the coverage map is
	// written.)
	if !regexp.MustCompile(`n1 +leads +16 +holds +16 .*\(leading 13 now\)`).MatchString(text) {
		t.Fatalf("status text lacks n1's 16 partitions in the map and 13 led now:\n%s", text)
	}
	if _, err := PublishLeads(ctx, cli, "b", "u-b", "n1", append(led, 3, 4, 11)); err != nil {
		t.Fatal(err)
	}
	if bs, text = status(); len(bs.Leaderless) != 0 || strings.Contains(text, "no leader yet") {
		t.Fatalf("every partition claimed, still leaderless %v:\n%s", bs.Leaderless, text)
	}
	if bs.Leading["n1"] != 16 || strings.Contains(text, "leading") {
		t.Fatalf("n1 leads all it is preferred for, yet leading %v:\n%s", bs.Leading, text)
	}
}

// TestBalancedNeedsEveryBucketPlaced: GET /pools/default's "balanced" is
// false while a bucket has no map yet (just after it is created or the
// cluster forms), as while a partition is degraded, without a leader or
// lagging, and true only when none of those holds.
func TestBalancedNeedsEveryBucketPlaced(t *testing.T) {
	ok := BucketStatus{Name: "a", Placed: true}
	cases := []struct {
		name string
		b    BucketStatus
		want bool
	}{
		{"placed, every partition led, none lagging", ok, true},
		{"not placed yet", BucketStatus{Name: "b"}, false},
		{"degraded", BucketStatus{Name: "b", Placed: true, Degraded: []int{3}}, false},
		{"without a leader", BucketStatus{Name: "b", Placed: true, Leaderless: []int{0, 1}}, false},
		{"lagging", BucketStatus{Name: "b", Placed: true, Lagging: []Lagging{{}}}, false},
	}
	for _, c := range cases {
		st := &Status{Buckets: []BucketStatus{ok, c.b}}
		if got := st.Balanced(); got != c.want {
			t.Errorf("%s: balanced %v, want %v", c.name, got, c.want)
		}
	}
	if !(&Status{}).Balanced() {
		t.Error("a cluster with no bucket: not balanced")
	}
}
