// Package examples_test runs the walk-through script against a real server,
// so the example stays true.
package examples_test

import (
	"context"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/httpapi"
	"github.com/mayflydb/mayfly/pager"
	"github.com/mayflydb/mayfly/views"
)

// TestWalkthrough runs examples/walkthrough.sh with curl against the HTTP
// API. It waits real seconds for two documents to expire: an end-to-end test
// on the wall clock, on purpose.
func TestWalkthrough(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for real expiry")
	}
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	ctx := context.Background()
	eng, err := engine.Open(t.TempDir(), &engine.Options{NumPartitions: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if _, err := eng.CreateBucket(ctx, engine.DefaultBucketSettings("default")); err != nil {
		t.Fatal(err)
	}
	vs, err := views.New(ctx, eng, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer vs.Close()
	pm := pager.New(eng, nil)
	defer pm.Close(ctx)
	users, err := auth.Open(t.TempDir(), &auth.Options{AdminUser: "Administrator", AdminPassword: "walk-through-pw",
		Argon2: &auth.Argon2Params{Time: 1, Memory: 64, Threads: 1, KeyLen: 32}, ScramIterations: 100})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(eng, &httpapi.Options{Views: vs, Pager: pm, Auth: users}))
	defer srv.Close()

	// Without credentials the script stops at its first request.
	cmd := exec.Command("bash", "walkthrough.sh")
	cmd.Env = append(cmd.Environ(), "MAYFLY_HOST="+srv.URL, "MAYFLY_USER=Administrator", "MAYFLY_PASSWORD=wrong")
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), `"unauthorized"`) {
		t.Fatalf("walkthrough.sh with a wrong password: %v\n%s", err, out)
	}

	// A pager interval lowered earlier does not change the story, and is
	// put back afterwards.
	five := int64(5)
	if _, err := pm.SetSettings(ctx, "default", &five, nil); err != nil {
		t.Fatal(err)
	}
	cmd = exec.Command("bash", "walkthrough.sh")
	cmd.Env = append(cmd.Environ(), "MAYFLY_HOST="+srv.URL, "MAYFLY_USER=Administrator", "MAYFLY_PASSWORD=walk-through-pw")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("walkthrough.sh: %v\n%s", err, out)
	}
	if st, err := pm.Settings("default"); err != nil || st.ExpPagerStime != 5 {
		t.Errorf("exp_pager_stime after the walk-through: %+v %v, want 5 back", st, err)
	}
	text := string(out)
	for _, want := range []string{
		`{"id":"session::ann","key":"ann","value":999,"doc":null}`, // expired, not yet purged
		`"value":{"sum":2898,"count":8,"min":40,"max":999,`,        // still in the reduce
		`"purged":2`, // the pager run
		`{"key":null,"value":{"sum":900,"count":6,"min":40,"max":310,`, // corrected
	} {
		if !strings.Contains(text, want) {
			t.Errorf("walkthrough output lacks %s\n%s", want, text)
		}
	}
}
