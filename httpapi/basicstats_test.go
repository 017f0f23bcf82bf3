package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/httpapi"
)

// A bucket's REST answer carries Couchbase's basicStats, which monitoring
// tools (Metricbeat, New Relic, Nagios checks) read: quotaPercentUsed
// (memUsed over the quota), opsPerSec (mutations per second) and
// diskFetches (ep_bg_fetched per second) over the stats history's last
// interval, itemCount, diskUsed and dataUsed (the bucket's files),
// memUsed and vbActiveNumNonResident. A review found it carried only
// itemCount and memUsed.
func TestBucketBasicStats(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	hist := httpapi.NewStatsHistory(10, 0)
	hist.SetClock(clock)
	f := newOptionsFixture(t, nil, func(o *httpapi.Options) { o.StatsHistory = hist })
	if st, _, body := f.do("POST", "/pools/default/buckets", formCT, "name=cb&bucketType=couchbase&ramQuota=1"); st != 202 {
		t.Fatalf("create bucket: %d %s", st, body)
	}
	b, err := f.eng.Bucket("cb")
	if err != nil {
		t.Fatal(err)
	}
	type basic struct {
		QuotaPercentUsed, OpsPerSec, DiskFetches            *float64
		ItemCount, DiskUsed, DataUsed, MemUsed, NonResident *int64
	}
	get := func() basic {
		t.Helper()
		st, _, body := f.do("GET", "/pools/default/buckets/cb", "", "")
		var v struct {
			BasicStats map[string]json.RawMessage `json:"basicStats"`
		}
		if err := json.Unmarshal([]byte(body), &v); st != 200 || err != nil {
			t.Fatalf("GET the bucket: %d %v %.200s", st, err, body)
		}
		var out basic
		for name, dst := range map[string]any{
			"quotaPercentUsed": &out.QuotaPercentUsed, "opsPerSec": &out.OpsPerSec, "diskFetches": &out.DiskFetches,
			"itemCount": &out.ItemCount, "diskUsed": &out.DiskUsed, "dataUsed": &out.DataUsed,
			"memUsed": &out.MemUsed, "vbActiveNumNonResident": &out.NonResident,
		} {
			raw, ok := v.BasicStats[name]
			if !ok {
				t.Fatalf("basicStats lacks %s: %s", name, body)
			}
			if err := json.Unmarshal(raw, dst); err != nil {
				t.Fatalf("basicStats.%s: %v", name, err)
			}
		}
		return out
	}
	stats := func() map[string]int64 {
		t.Helper()
		_, _, body := f.do("GET", "/pools/default/buckets/cb/stats", "", "")
		var m map[string]int64
		if err := json.Unmarshal([]byte(body), &m); err != nil {
			t.Fatal(body)
		}
		return m
	}

	hist.Sample()
	if g := get(); *g.OpsPerSec != 0 || *g.DiskFetches != 0 || *g.ItemCount != 0 {
		t.Fatalf("an empty bucket with one sample: opsPerSec %v, diskFetches %v, itemCount %d", *g.OpsPerSec, *g.DiskFetches, *g.ItemCount)
	}
	const n = 500
	pad := strings.Repeat("x", 4000)
	for i := range n {
		if st, _, body := f.do("PUT", fmt.Sprintf("/cb/docs/k%03d", i), "application/json", fmt.Sprintf(`{"n":%d,"pad":"%s"}`, i, pad)); st >= 300 {
			t.Fatalf("put %d: %d %s", i, st, body)
		}
	}
	if err := b.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	advance(5 * time.Second)
	hist.Sample()
	g := get()
	if *g.OpsPerSec != n/5 {
		t.Errorf("opsPerSec %v after %d writes in 5 s, want %d", *g.OpsPerSec, n, n/5)
	}
	if *g.ItemCount != n {
		t.Errorf("itemCount %d, want %d", *g.ItemCount, n)
	}
	if want := float64(*g.MemUsed) * 100 / (1 << 20); *g.MemUsed <= 0 || *g.QuotaPercentUsed != min(100, want) {
		t.Errorf("quotaPercentUsed %v with memUsed %d of a 1 MiB quota, want %v", *g.QuotaPercentUsed, *g.MemUsed, want)
	}
	if *g.NonResident <= 0 || *g.NonResident > n {
		t.Errorf("vbActiveNumNonResident %d after %d writes of 4 KB into 1 MiB, want some of them", *g.NonResident, n)
	}
	if *g.DataUsed <= 0 || *g.DataUsed > *g.DiskUsed {
		t.Errorf("dataUsed %d, diskUsed %d: want 0 < dataUsed <= diskUsed", *g.DataUsed, *g.DiskUsed)
	}

	before := stats()["ep_bg_fetched"]
	for i := range n {
		if st, _, body := f.do("GET", fmt.Sprintf("/cb/docs/k%03d", i), "", ""); st != 200 {
			t.Fatalf("get %d: %d %.80s", i, st, body)
		}
	}
	fetched := stats()["ep_bg_fetched"] - before
	advance(2 * time.Second)
	hist.Sample()
	g = get()
	if fetched <= 0 || *g.DiskFetches != float64(fetched)/2 {
		t.Errorf("diskFetches %v after %d values read back from disk in 2 s, want %v", *g.DiskFetches, fetched, float64(fetched)/2)
	}
	if *g.OpsPerSec != 0 {
		t.Errorf("opsPerSec %v over an interval of reads only, want 0 (mutations are counted)", *g.OpsPerSec)
	}
}
