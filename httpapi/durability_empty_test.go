package httpapi_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// An empty durabilityMinLevel ("durabilityMinLevel=" in a bucket edit) is
// refused with 400, as Couchbase refuses any value but the four names
// ({"errors":{"durabilityMinLevel":"Durability minimum level must be either
// none, majority, majorityAndPersistActive, or persistToMajority"}}), and
// the bucket keeps its level. A review found it accepted and stored as no
// level at all: the bucket's answer lacked durabilityMinLevel (gocb's
// GetBucket reads that as DurabilityLevelNone), a request at
// ?durability=none was acknowledged from memory on a bucket that was at
// persistToMajority, and a restart brought persistToMajority back.
func TestDurabilityMinLevelEmptyRefused(t *testing.T) {
	f := newLevelFixture(t)
	form := "application/x-www-form-urlencoded"
	st, _, body := f.do("POST", "/pools/default/buckets/default", form, "durabilityMinLevel=")
	var ans struct {
		Errors map[string]string `json:"errors"`
	}
	json.Unmarshal([]byte(body), &ans)
	if st != 400 || !strings.HasPrefix(ans.Errors["durabilityMinLevel"], "Durability minimum level must be either none") {
		t.Errorf("edit with durabilityMinLevel= : %d %s, want 400 with errors.durabilityMinLevel", st, body)
	}
	if st, _, body := f.do("GET", "/pools/default/buckets/default", "", ""); !strings.Contains(body, `"durabilityMinLevel":"persistToMajority"`) {
		t.Errorf("after the edit the bucket reads %d %s, want durabilityMinLevel persistToMajority kept", st, body)
	}
	if got := f.mustBucket("default").Settings().DurabilityMinLevel; got != "persistToMajority" {
		t.Errorf("bucket setting after the edit: %q, want persistToMajority", got)
	}
	// The level still holds: a request at none is raised to it, on disk
	// when answered (it was acknowledged from memory after the edit).
	if st, _, body := f.do("PUT", "/default/docs/k?durability=none", "application/json", `{"v":1}`); st >= 300 {
		t.Fatalf("PUT: %d %s", st, body)
	}
	if f.queued("default") {
		t.Errorf("after the edit a write at ?durability=none was answered before it was on disk: the bucket's persistToMajority no longer raises it")
	}
	// Creating a bucket with an empty level is refused the same way.
	st, _, body = f.do("POST", "/pools/default/buckets", form, "name=e&durabilityMinLevel=")
	ans.Errors = nil
	json.Unmarshal([]byte(body), &ans)
	if st != 400 || ans.Errors["durabilityMinLevel"] == "" {
		t.Errorf("create with durabilityMinLevel= : %d %s, want 400 with errors.durabilityMinLevel", st, body)
	}
}

// An empty evictionPolicy in a bucket edit is refused with 400 and
// errors.evictionPolicy, as Couchbase refuses a policy that is not one of
// the bucket type's names. A review found it accepted and stored as no
// policy: the bucket's answer lacked evictionPolicy until a restart filled
// the default in.
func TestEvictionPolicyEmptyRefused(t *testing.T) {
	f := newFixture(t)
	form := "application/x-www-form-urlencoded"
	if st, _, body := f.do("POST", "/pools/default/buckets", form, "name=eph&bucketType=ephemeral"); st != 202 {
		t.Fatalf("create: %d %s", st, body)
	}
	st, _, body := f.do("POST", "/pools/default/buckets/eph", form, "evictionPolicy=")
	if st != 400 || !strings.Contains(body, `"evictionPolicy"`) {
		t.Errorf("edit with evictionPolicy= : %d %s, want 400 naming evictionPolicy", st, body)
	}
	if st, _, body := f.do("GET", "/pools/default/buckets/eph", "", ""); !strings.Contains(body, `"evictionPolicy":"noEviction"`) {
		t.Errorf("after the edit the bucket reads %d %s, want evictionPolicy noEviction kept", st, body)
	}
}
