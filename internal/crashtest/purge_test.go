package crashtest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestPurgesSurviveRestart is the check a user makes: documents that expired
// and were purged (by the pager, or by a read) stay purged across a clean
// restart (SIGTERM) and a kill -9: curr_items, ep_expired_unpurged, the
// tombstone count and the change feed's rows (expirations as deletions
// marked expired) are the same after the restart as before it. (Purges used
// to be written lazily, and every purged document came back as expired and
// unpurged until the next pager run.)
func TestPurgesSurviveRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the server as a child process")
	}
	tmp := t.TempDir()
	bin := buildServer(t)
	data, logPath := filepath.Join(tmp, "data"), filepath.Join(tmp, "server.log")
	ctx := context.Background()
	s, err := startServer(bin, data, logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.kill() }()
	do := func(method, path string) []byte {
		t.Helper()
		status, body, _, err := s.do(ctx, method, path, []byte(`{"v":1}`), 30*time.Second)
		if err != nil || status/100 != 2 && status != http.StatusNotFound {
			t.Fatalf("%s %s: %d %s %v", method, path, status, body, err)
		}
		return body
	}
	// A negative expiry stores a document already expired (as memcached
	// does), so nothing waits for the clock.
	for i := range 200 {
		do(http.MethodPut, fmt.Sprintf("/default/docs/paged%d?expiry=-1", i))
	}
	for i := range 20 {
		do(http.MethodPut, fmt.Sprintf("/default/docs/lazy%d?expiry=-1", i))
		do(http.MethodGet, fmt.Sprintf("/default/docs/lazy%d", i)) // 404, purged on the way
	}
	for i := range 50 {
		do(http.MethodPut, fmt.Sprintf("/default/docs/live%d", i))
	}
	do(http.MethodPost, "/pools/default/buckets/default/controller/runExpiryPager")

	type view struct {
		stats map[string]int64
		rows  map[string]string // id → rev, deleted, expired
	}
	look := func() view {
		t.Helper()
		var st map[string]int64
		if err := json.Unmarshal(do(http.MethodGet, "/pools/default/buckets/default/stats"), &st); err != nil {
			t.Fatal(err)
		}
		v := view{stats: map[string]int64{}, rows: map[string]string{}}
		for _, k := range []string{"curr_items", "ep_expired_unpurged", "ep_tombstones", "ep_items_with_expiry"} {
			v.stats[k] = st[k]
		}
		var feed struct {
			Results []struct {
				ID      string `json:"id"`
				Changes []struct {
					Rev string `json:"rev"`
				} `json:"changes"`
				Deleted, Expired bool
			} `json:"results"`
		}
		if err := json.Unmarshal(do(http.MethodGet, "/default/_changes"), &feed); err != nil {
			t.Fatal(err)
		}
		for _, r := range feed.Results {
			v.rows[r.ID] = fmt.Sprintf("%v deleted=%v expired=%v", r.Changes, r.Deleted, r.Expired)
		}
		return v
	}
	before := look()
	if want := map[string]int64{"curr_items": 50, "ep_expired_unpurged": 0, "ep_tombstones": 220, "ep_items_with_expiry": 0}; !maps.Equal(before.stats, want) {
		t.Fatalf("after the purges: %v, want %v", before.stats, want)
	}
	if len(before.rows) != 270 || !strings.HasSuffix(before.rows["paged0"], "deleted=true expired=true") ||
		!strings.HasSuffix(before.rows["lazy0"], "deleted=true expired=true") {
		t.Fatalf("change feed after the purges: %d rows, paged0 %q, lazy0 %q", len(before.rows), before.rows["paged0"], before.rows["lazy0"])
	}
	for _, how := range []string{"SIGTERM", "kill -9"} {
		if how == "SIGTERM" {
			if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			select {
			case <-s.done:
			case <-time.After(30 * time.Second):
				t.Fatal("mayfly serve still running 30 s after SIGTERM")
			}
		} else {
			s.kill()
		}
		if s, err = startServer(bin, data, logPath); err != nil {
			t.Fatal(err)
		}
		after := look()
		if !maps.Equal(after.stats, before.stats) {
			t.Errorf("after %s and a restart: %v, before %v", how, after.stats, before.stats)
		}
		if !maps.Equal(after.rows, before.rows) {
			var diff []string
			for id, r := range before.rows {
				if after.rows[id] != r {
					diff = append(diff, fmt.Sprintf("%s: %q → %q", id, r, after.rows[id]))
				}
			}
			slices.Sort(diff)
			t.Errorf("after %s and a restart the change feed differs (%d rows before, %d after): %v", how, len(before.rows), len(after.rows), diff[:min(len(diff), 5)])
		}
	}
}
