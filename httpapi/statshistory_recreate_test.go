package httpapi_test

import (
	"strconv"
	"testing"

	"github.com/mayflydb/mayfly/httpapi"
)

// A bucket deleted and created again under the same name between two of
// the StatsHistory's samples (a script's "reset the bucket", well within
// the 3 s interval) starts with no samples: the console's Stats page of the
// new, empty bucket charts only its own numbers. The history keeps each
// bucket's samples by name and drops a name's only when a sample finds it
// gone, so a review found that the new bucket showed the deleted one's
// curr_items and mem_used.
func TestStatsHistoryRecreatedBetweenSamples(t *testing.T) {
	hist := httpapi.NewStatsHistory(10, 0)
	f := newOptionsFixture(t, nil, func(o *httpapi.Options) { o.StatsHistory = hist })
	for i := range 5 {
		if st, _, body := f.do("PUT", "/default/docs/d"+strconv.Itoa(i), "application/json", `{"v":1}`); st >= 300 {
			t.Fatalf("PUT: %d %s", st, body)
		}
	}
	hist.Sample()
	hist.Sample()
	if h := f.statsHistory("default"); h.Op.SamplesCount != 2 || h.Op.Samples["curr_items"][1] != 5 {
		t.Fatalf("before the delete: %+v", h.Op)
	}
	// Deleted and created again with no sample in between.
	if st, _, body := f.do("DELETE", "/pools/default/buckets/default", "", ""); st != 200 {
		t.Fatalf("DELETE bucket: %d %s", st, body)
	}
	if st, _, body := f.do("POST", "/pools/default/buckets", "application/x-www-form-urlencoded", "name=default"); st != 202 {
		t.Fatalf("create bucket: %d %s", st, body)
	}
	if h := f.statsHistory("default"); h.Op.SamplesCount != 0 {
		t.Errorf("the new bucket's history before its first sample: curr_items %v, mem_used %v, want none (the deleted bucket's)",
			h.Op.Samples["curr_items"], h.Op.Samples["mem_used"])
	}
	hist.Sample()
	h := f.statsHistory("default")
	if ci := h.Op.Samples["curr_items"]; len(ci) != 1 || ci[0] != 0 {
		t.Errorf("the new, empty bucket's history after one sample: curr_items %v, want [0]", ci)
	}
	for j, m := range h.Op.Samples["mem_used"] {
		if m != 0 {
			t.Errorf("the new, empty bucket's mem_used sample %d is %d, want 0 (it holds no document)", j, m)
		}
	}
}
