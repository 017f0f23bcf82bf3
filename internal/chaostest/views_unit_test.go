package chaostest

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// The views case's model orders rows by type, then n (as a number: 10
// after 9), then id, and reduces, groups and answers keys as a node must;
// these are the answers the chaos test compares every node's with.
func TestViewModel(t *testing.T) {
	m := newViewModel([]typedDoc{
		{id: "v002", typ: "b", n: 10},
		{id: "v001", typ: "b", n: 9},
		{id: "v004", typ: "a", n: 3},
		{id: "v003", typ: "b", n: 9},
	})
	var ids []string
	for _, r := range m.rows {
		ids = append(ids, r.ID)
	}
	if want := []string{"v004", "v001", "v003", "v002"}; !reflect.DeepEqual(ids, want) {
		t.Fatalf("rows in order %v, want %v", ids, want)
	}
	answers := map[string]string{}
	for _, q := range m.queries() {
		b, _ := json.Marshal(normal(q.want))
		answers[q.view+"?"+q.q] = string(b)
	}
	want := map[string]string{
		"sum?":                `{"rows":[{"key":null,"value":31}]}`,
		"sum?group_level=1":   `{"rows":[{"key":["a"],"value":3},{"key":["b"],"value":28}]}`,
		"sum?group=true":      `{"rows":[{"key":["a",3],"value":3},{"key":["b",9],"value":18},{"key":["b",10],"value":10}]}`,
		"count?group_level=1": `{"rows":[{"key":["a"],"value":1},{"key":["b"],"value":3}]}`,
		"sum?reduce=false&descending=true&skip=3&limit=10": `{"rows":[{"id":"v004","key":["a",3],"value":3}],"total_rows":4}`,
	}
	for q, w := range want {
		if answers[q] != w {
			t.Errorf("%s: model answers %s, want %s", q, answers[q], w)
		}
	}
	// keys: caller order, a duplicate twice, a missing key nothing.
	found := 0
	for q, a := range answers {
		if strings.HasPrefix(q, "sum?reduce=false&keys=") {
			found++
			if w := `{"rows":[],"total_rows":4}`; a != w {
				t.Errorf("keys (none of them emitted here): %s, want %s", a, w)
			}
		}
	}
	m2 := newViewModel([]typedDoc{{id: "v001", typ: "b", n: 3}, {id: "v000", typ: "a", n: 7}, {id: "v002", typ: "b", n: 3}})
	for _, q := range m2.queries() {
		if q.view == "sum" && strings.HasPrefix(q.q, "reduce=false&keys=") {
			found++
			b, _ := json.Marshal(normal(q.want.Rows))
			if w := `[{"id":"v001","key":["b",3],"value":3},{"id":"v002","key":["b",3],"value":3},{"id":"v000","key":["a",7],"value":7},{"id":"v001","key":["b",3],"value":3},{"id":"v002","key":["b",3],"value":3}]`; string(b) != w {
				t.Errorf("keys: model answers %s, want %s", b, w)
			}
		}
	}
	if found != 2 {
		t.Errorf("%d keys queries in the models, want 1 each", found)
	}
}

// MAYFLY_CHAOS_CASES: empty is every case, a list is those in its order,
// a name not a case is refused.
func TestParseCases(t *testing.T) {
	if got, err := parseCases(""); err != nil || !reflect.DeepEqual(got, allCases) {
		t.Errorf(`parseCases("") = %v, %v`, got, err)
	}
	if got, err := parseCases("views, etcd"); err != nil || !reflect.DeepEqual(got, []string{"views", "etcd"}) {
		t.Errorf(`parseCases("views, etcd") = %v, %v`, got, err)
	}
	if got, err := parseCases("partition"); err != nil || !reflect.DeepEqual(got, []string{"partition"}) {
		t.Errorf(`parseCases("partition") = %v, %v`, got, err)
	}
	if _, err := parseCases("kill,netsplit"); err == nil {
		t.Error(`parseCases("kill,netsplit") takes an unknown case`)
	}
}
