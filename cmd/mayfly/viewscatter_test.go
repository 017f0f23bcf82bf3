package main

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/cluster"
	"github.com/tidwall/gjson"
)

// viewReq sends an HTTP request to a node as the administrator.
func viewReq(method, addr, path, body string) (int, string, error) {
	code, _, body, err := viewReqH(method, addr, path, body)
	return code, body, err
}

// viewReqH is viewReq, with the answer's headers.
func viewReqH(method, addr, path, body string) (int, http.Header, string, error) {
	req, err := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, "", err
	}
	req.SetBasicAuth("Administrator", "password")
	req.Header.Set("Content-Type", "application/json")
	cl := http.Client{Timeout: time.Minute}
	resp, err := cl.Do(req)
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b), err
}

// scatterDDoc is the design document viewsAgree puts: a row per
// document, keyed by its "v", counted.
const scatterDDoc = `{"views":{"v":{"map":"function (doc, meta) { emit(doc.v, null); }","reduce":"_count"}}}`

// scatterAnswers are view queries of scatterDDoc's view and the answers one
// node holding the acknowledged documents acked gives.
func scatterAnswers(acked map[string]ackedDoc) map[string]string {
	type row struct {
		id string
		v  int64
	}
	var rows []row
	for k, d := range acked {
		if !d.deleted {
			rows = append(rows, row{k, gjson.Get(d.value, "v").Int()})
		}
	}
	slices.SortFunc(rows, func(a, b row) int {
		if a.v != b.v {
			return int(a.v - b.v)
		}
		return strings.Compare(a.id, b.id)
	})
	mapAnswer := func(rs []row) string {
		var b strings.Builder
		fmt.Fprintf(&b, `{"total_rows":%d,"rows":[`, len(rows))
		for i, r := range rs {
			if i == 0 {
				b.WriteString("\r\n")
			} else {
				b.WriteString(",\r\n")
			}
			fmt.Fprintf(&b, `{"id":%q,"key":%d,"value":null}`, r.id, r.v)
		}
		b.WriteString("\r\n]\r\n}\n")
		return b.String()
	}
	desc := slices.Clone(rows)
	slices.Reverse(desc)
	return map[string]string{
		"?stale=false&reduce=false":                                mapAnswer(rows),
		"?stale=false&reduce=false&descending=true&skip=3&limit=7": mapAnswer(desc[3:10]),
		"?stale=false": fmt.Sprintf("{\"rows\":[\r\n{\"key\":null,\"value\":%d}\r\n]\r\n}\n", len(rows)),
	}
}

// viewsAgree checks that a view query at every node of a cluster answers
// as one node holding every acknowledged document would: each node covers
// the partitions it leads, so a node answering from its own copy of every
// partition (or a coverer not keeping to its share) would repeat rows.
// The documents' values are {"v":N,...}.
func viewsAgree(t *testing.T, nodes []*procNode, acked map[string]ackedDoc) {
	t.Helper()
	// Put on one node, the design document reaches the others through
	// etcd: until a coverer has it, its share is missing (in "errors").
	if code, body, err := viewReq(http.MethodPut, nodes[0].http, "/default/_design/scatter", scatterDDoc); err != nil || code != http.StatusCreated {
		t.Fatalf("%s: PUT a design document: %d %s %v", nodes[0].name, code, body, err)
	}
	queries := scatterAnswers(acked)
	for _, n := range nodes {
		eventuallyT(t, n.name+" has the design document", func() error {
			code, body, err := viewReq(http.MethodGet, n.http, "/default/_design/scatter", "")
			if err != nil || code != http.StatusOK {
				return fmt.Errorf("%d %s %v", code, body, err)
			}
			return nil
		})
	}
	for _, n := range nodes {
		for q, want := range queries {
			code, h, got, err := viewReqH(http.MethodGet, n.http, "/default/_design/scatter/_view/v"+q, "")
			if err != nil || code != http.StatusOK || got != want {
				t.Errorf("%s: view query %s: %d %v\n got %q\nwant %q", n.name, q, code, err, got, want)
			}
			// Each node leads a third of the partitions: three shares merged.
			if nodes := h.Get("X-Mayfly-View-Nodes"); nodes != "3" {
				t.Errorf("%s: view query %s merged the shares of %q nodes, want 3", n.name, q, nodes)
			}
		}
	}
}

// TestCoverageOf: each partition of a placed map is covered by exactly
// one node, its preferred leader; the node itself is marked.
func TestCoverageOf(t *testing.T) {
	m := &cluster.PartitionMap{Bucket: "b", Copies: 3, Partitions: cluster.Place([]string{"n1", "n2", "n3", "n4"}, cluster.NumPartitions, 3)}
	m.Partitions[5].Leader = "" // no copy anywhere: no coverer
	cov := coverageOf(m, 42, "n2", func(string) bool { return true })
	if cov.Rev != 42 || len(cov.Nodes) != 4 {
		t.Fatalf("coverage: rev %d, %d nodes", cov.Rev, len(cov.Nodes))
	}
	seen := make([]int, cluster.NumPartitions)
	for _, c := range cov.Nodes {
		if c.Self != (c.Name == "n2") {
			t.Errorf("%s marked self %v", c.Name, c.Self)
		}
		for _, p := range c.Partitions {
			seen[p]++
			if m.Partitions[p].Leader != c.Name {
				t.Errorf("partition %d covered by %s, led by %s", p, c.Name, m.Partitions[p].Leader)
			}
		}
	}
	for p, n := range seen {
		want := 1
		if p == 5 {
			want = 0
		}
		if n != want {
			t.Errorf("partition %d covered %d times, want %d", p, n, want)
		}
	}
}

// TestCoverageAroundADownNode: the partitions whose preferred leader is
// down are covered by another voter that is up (this node when it is one),
// each exactly once; none is given to a node that is down; a partition
// none of whose voters is up stays with its leader.
func TestCoverageAroundADownNode(t *testing.T) {
	m := &cluster.PartitionMap{Bucket: "b", Copies: 3, Partitions: cluster.Place([]string{"n1", "n2", "n3", "n4"}, cluster.NumPartitions, 3)}
	m.Partitions[7].Voters = []string{"n3"}
	m.Partitions[7].Leader = "n3"
	up := func(n string) bool { return n != "n3" }
	self := ""
	for p, e := range m.Partitions {
		if e.Leader == "n3" && p != 7 {
			self = e.Voters[slices.IndexFunc(e.Voters, func(v string) bool { return v != "n3" })]
			break
		}
	}
	cov := coverageOf(m, 42, self, up)
	seen := make([]int, cluster.NumPartitions)
	moved, toSelf := 0, 0
	for _, c := range cov.Nodes {
		for _, p := range c.Partitions {
			seen[p]++
			e := m.Partitions[p]
			switch {
			case p == 7:
				if c.Name != "n3" {
					t.Errorf("partition 7 (no voter up) covered by %s, want its leader n3", c.Name)
				}
			case c.Name == "n3":
				t.Errorf("partition %d covered by n3, which is down", p)
			case e.Leader == "n3":
				moved++
				if !slices.Contains(e.Voters, c.Name) {
					t.Errorf("partition %d covered by %s, not one of its voters %v", p, c.Name, e.Voters)
				}
				if slices.Contains(e.Voters, self) {
					if c.Name != self {
						t.Errorf("partition %d covered by %s though this node (%s) holds it", p, c.Name, self)
					}
					toSelf++
				}
			case c.Name != e.Leader:
				t.Errorf("partition %d covered by %s, led by %s (up)", p, c.Name, e.Leader)
			}
		}
	}
	for p, n := range seen {
		if n != 1 {
			t.Errorf("partition %d covered %d times", p, n)
		}
	}
	if moved == 0 || toSelf == 0 {
		t.Fatalf("moved %d partitions, %d of them to this node", moved, toSelf)
	}
}
