package cluster

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// A node's report of lagging replicas shows in the status of the bucket it
// names, marked with the reporting leader, and in the text; a report from
// a node that is not up is left out; publishing the same report again
// writes nothing.
func TestLaggingInStatus(t *testing.T) {
	ctx := context.Background()
	nodes := startAll(t, ctx, []Config{testConfig(t, testPeers(t, 1), "n1", t.TempDir(), &syncLog{})})
	defer closeAll(nodes)
	cli := nodes[0].Client()
	if err := DefineBucket(ctx, cli, BucketDef{BucketSettings: engine.DefaultBucketSettings("b")}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the bucket placed", func() (bool, string) {
		m, _, err := ReadMap(ctx, cli, "b")
		return err == nil && m != nil, fmt.Sprint(err)
	})
	pub := NewLagPublisher(cli, "n1")
	lag := []Lagging{{Bucket: "b", Follower: "n3", Why: "down", Partitions: []int{4, 5, 6, 9}, MaxBehind: 12}}
	if err := pub.Publish(ctx, lag); err != nil {
		t.Fatal(err)
	}
	before, err := cli.Get(ctx, lagPrefix+"n1")
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.Publish(ctx, []Lagging{{Bucket: "b", Follower: "n3", Why: "down", Partitions: []int{4, 5, 6, 9}, MaxBehind: 12}}); err != nil {
		t.Fatal(err)
	}
	after, err := cli.Get(ctx, lagPrefix+"n1")
	if err != nil {
		t.Fatal(err)
	}
	if after.Kvs[0].ModRevision != before.Kvs[0].ModRevision {
		t.Fatalf("the same report was written again")
	}
	if err := NewLagPublisher(cli, "gone").Publish(ctx, []Lagging{{Bucket: "b", Follower: "n1", Why: "probe", Partitions: []int{1}}}); err != nil {
		t.Fatal(err)
	}

	s, err := ReadStatus(ctx, cli, nil)
	if err != nil {
		t.Fatal(err)
	}
	bs, ok := s.Bucket("b")
	if !ok || len(bs.Lagging) != 1 {
		t.Fatalf("bucket b's lagging: %+v", bs.Lagging)
	}
	if l := bs.Lagging[0]; l.Leader != "n1" || l.Follower != "n3" || l.Why != "down" || l.MaxBehind != 12 || len(l.Partitions) != 4 {
		t.Fatalf("lagging %+v", l)
	}
	var text strings.Builder
	if err := s.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if want := "lagging: n3 behind n1 (down) in 4 partitions, at most 12 entries: 4-6,9"; !strings.Contains(text.String(), want) {
		t.Fatalf("status text lacks %q:\n%s", want, text.String())
	}

	if err := pub.Publish(ctx, nil); err != nil { // caught up
		t.Fatal(err)
	}
	if s, err = ReadStatus(ctx, cli, nil); err != nil {
		t.Fatal(err)
	}
	if bs, _ := s.Bucket("b"); len(bs.Lagging) != 0 {
		t.Fatalf("lagging after an empty report: %+v", bs.Lagging)
	}
}

// A long list of partitions is cut in the text, saying how many are left.
func TestShortRanges(t *testing.T) {
	var ns []int
	for p := 0; p < 100; p += 2 {
		ns = append(ns, p)
	}
	ns = append(ns, 101, 102, 103)
	if got, want := shortRanges(ns, 3), "0,2,4,… (50 more)"; got != want {
		t.Fatalf("shortRanges = %q, want %q", got, want)
	}
	if got, want := shortRanges([]int{1, 2, 3, 9}, 3), "1-3,9"; got != want {
		t.Fatalf("shortRanges = %q, want %q", got, want)
	}
}
