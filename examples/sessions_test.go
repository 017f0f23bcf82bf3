package examples_test

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/httpapi"
	"github.com/mayflydb/mayfly/views"
)

// TestSessions runs examples/sessions.sh with curl against the HTTP API.
// The script's waits move the server's clock (ADVANCE, a URL the test
// serves) instead of sleeping: run by hand it sleeps real seconds, but here
// a busy machine's slow requests must not carry the sessions past their
// expiry between two of its steps (a fresh-clone CI run at load 10 saw the
// bucket's four writes span two seconds and its first step find one live
// session of four).
func TestSessions(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "sed"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	ctx := context.Background()
	start := time.Now().Unix() // wall clock: the script's documents get plausible dates
	clk := engine.NewFakeClock(start)
	var (
		mu     sync.Mutex
		waited float64 // seconds the script has waited, fractions included
	)
	advance := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		secs, err := strconv.ParseFloat(r.URL.Query().Get("seconds"), 64)
		if err != nil || secs < 0 || r.Method != http.MethodPost {
			http.Error(w, "POST ?seconds=N", http.StatusBadRequest)
			return
		}
		mu.Lock()
		waited += secs
		clk.Set(start + int64(math.Floor(waited))) // a second passes as a wall clock's would
		mu.Unlock()
	}))
	defer advance.Close()
	eng, err := engine.Open(t.TempDir(), &engine.Options{NumPartitions: 64, Clock: clk})
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
	users, err := auth.Open(t.TempDir(), &auth.Options{AdminUser: "Administrator", AdminPassword: "sessions-pw",
		Argon2: &auth.Argon2Params{Time: 1, Memory: 64, Threads: 1, KeyLen: 32}, ScramIterations: 100})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(eng, &httpapi.Options{Views: vs, Auth: users}))
	defer srv.Close()

	cmd := exec.Command("bash", "sessions.sh")
	cmd.Env = append(cmd.Environ(), "MAYFLY_HOST="+srv.URL, "MAYFLY_USER=Administrator", "MAYFLY_PASSWORD=sessions-pw", "SCOPE=app", "ADVANCE="+advance.URL)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sessions.sh: %v\n%s", err, out)
	}
	text := string(out)
	// At every step the exact count is the number of rows.
	for _, m := range regexp.MustCompile(`live rows: (\d+)  exact _count: (\d+)`).FindAllStringSubmatch(text, -1) {
		if m[1] != m[2] {
			t.Errorf("exact count %s disagrees with %s live rows", m[2], m[1])
		}
	}
	for _, want := range []string{
		`"defaultTTL":3600`,
		`ttl field must be -1 or an integer`,
		`"reevaluated":2`,
		"cart1 expiration: 0  cart2 expiration: 0",
		"forgotten: 404",
		"used: 200",
		"expiration - created = 7",
		`"ep_sliding_extends":`,
		// The exact count follows the sessions: all four, then the two
		// that are read, then none once their cap has passed.
		"step 1: live rows: 4  exact _count: 4",
		"step 2: live rows: 2  exact _count: 2",
		"step 3: live rows: 2  exact _count: 2",
		"step 5: live rows: 0  exact _count: 0",
		"a: 404  b: 404",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("sessions.sh output lacks %s\n%s", want, text)
		}
	}
	if err := eng.Check(ctx); err != nil {
		t.Error(err)
	}
}
