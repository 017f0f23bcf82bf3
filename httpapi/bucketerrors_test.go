package httpapi_test

import (
	"encoding/json"
	"testing"
)

// TestBucketParamErrorsNameTheirField: every refused bucket parameter is a
// 400 whose answer carries Couchbase's "errors" object naming the field
// (what the SDKs' bucket managers and the console read), not only a
// reason; a body of another type than a form or JSON is a 415 rather than
// read as no parameters at all.
func TestBucketParamErrorsNameTheirField(t *testing.T) {
	f := newFixture(t)
	const form = "application/x-www-form-urlencoded"
	for _, c := range []struct{ path, body, field string }{
		{"/pools/default/buckets", "name=b1&ramQuota=abc", "ramQuota"},
		{"/pools/default/buckets", "name=b1&ramQuotaMB=abc", "ramQuotaMB"},
		{"/pools/default/buckets", "name=b1&bucketType=bogus", "bucketType"},
		{"/pools/default/buckets", "name=b1&numVBuckets=0", "numVBuckets"},
		{"/pools/default/buckets", "name=b1&flushEnabled=2", "flushEnabled"},
		{"/pools/default/buckets", "name=b1&purgeInterval=abc", "purgeInterval"},
		{"/pools/default/buckets", "name=", "name"},
		{"/pools/default/buckets", "name=b1&replicaNumber=x", "replicaNumber"},
		{"/pools/default/buckets/default", "maxTTL=abc", "maxTTL"},
		{"/pools/default/buckets/default", "numVBuckets=7", "numVBuckets"},
		{"/pools/default/buckets/default", "bucketType=ephemeral", "bucketType"},
	} {
		st, _, body := f.do("POST", c.path, form, c.body)
		var out struct {
			Errors map[string]string `json:"errors"`
		}
		if st != 400 || json.Unmarshal([]byte(body), &out) != nil || out.Errors[c.field] == "" {
			t.Errorf("POST %s %s: %d %s, want 400 with errors.%s", c.path, c.body, st, body, c.field)
		}
	}
	// The type as it is, as an SDK's UpdateBucket sends it back, is taken.
	for _, typ := range []string{"membase", "couchbase"} {
		if st, _, body := f.do("POST", "/pools/default/buckets/default", form, "bucketType="+typ+"&maxTTL=5"); st != 200 {
			t.Errorf("an update repeating bucketType=%s: %d %s", typ, st, body)
		}
	}
	if st, _, body := f.do("POST", "/pools/default/buckets", "text/plain", "name=j2"); st != 415 {
		t.Errorf("a text/plain body: %d %s, want 415", st, body)
	}
	if st, _, body := f.do("GET", "/pools/default/buckets/b1", "", ""); st != 404 {
		t.Errorf("a refused bucket exists: %d %s", st, body)
	}
}

// TestBucketRAMQuotaRange: a ramQuota out of range is refused under the
// name the request gave it (ramQuota, or ramQuotaMB), and one so large that
// its bytes overflowed (the quota then read as negative, and the bucket
// ejected every value it could) is refused, leaving the quota as it was.
func TestBucketRAMQuotaRange(t *testing.T) {
	f := newFixture(t)
	const form = "application/x-www-form-urlencoded"
	for _, c := range []struct{ path, body, field string }{
		{"/pools/default/buckets", "name=b1&ramQuota=0", "ramQuota"},
		{"/pools/default/buckets", "name=b1&ramQuota=-5", "ramQuota"},
		{"/pools/default/buckets", "name=b1&ramQuotaMB=0", "ramQuotaMB"},
		{"/pools/default/buckets", "name=b1&ramQuota=8796093022208", "ramQuota"},
		{"/pools/default/buckets/default", "ramQuota=8796093022208", "ramQuota"},
		{"/pools/default/buckets/default", "ramQuota=16777217", "ramQuota"},
		{"/pools/default/buckets/default", "ramQuotaMB=9223372036854775807", "ramQuotaMB"},
	} {
		st, _, body := f.do("POST", c.path, form, c.body)
		var out struct {
			Errors map[string]string `json:"errors"`
		}
		if st != 400 || json.Unmarshal([]byte(body), &out) != nil || out.Errors[c.field] == "" {
			t.Errorf("POST %s %s: %d %s, want 400 with errors.%s", c.path, c.body, st, body, c.field)
		}
	}
	st, _, body := f.do("GET", "/pools/default/buckets/default", "", "")
	var b struct {
		Quota map[string]int64 `json:"quota"`
	}
	if st != 200 || json.Unmarshal([]byte(body), &b) != nil || b.Quota["ram"] != 100<<20 {
		t.Fatalf("the default bucket after refused quotas: %d %s, want quota.ram %d", st, body, 100<<20)
	}
	// The largest quota is taken, and reads back as it was given.
	if st, _, body := f.do("POST", "/pools/default/buckets/default", form, "ramQuota=16777216"); st != 200 {
		t.Fatalf("ramQuota=16777216: %d %s", st, body)
	}
	_, _, body = f.do("GET", "/pools/default/buckets/default", "", "")
	if json.Unmarshal([]byte(body), &b) != nil || b.Quota["ram"] != 16777216<<20 {
		t.Errorf("after ramQuota=16777216: %s, want quota.ram %d", body, int64(16777216)<<20)
	}
}
