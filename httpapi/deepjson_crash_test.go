package httpapi_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// deepJSONChildEnv names, in the process TestVeryDeepJSONDoesNotCrashServer
// starts, the request it sends: a crash ends that process, not this one.
const deepJSONChildEnv = "MAYFLY_TEST_DEEP_JSON_CHILD"

// TestVeryDeepJSONDoesNotCrashServer: a PUT body or a _bulk line of JSON
// nested ten million levels deep (20 MB, within the 20 MiB value limit) is
// refused as any value deeper than 10,000 levels is (a 400, a _bulk line's
// bad_request), a POST _all_docs body of 8 MiB nesting as deep is a 400,
// and the server goes on answering. A review found that each crashed the
// server instead: the body was checked with gjson's validator
// (engine.DetectType, parseBulkLine's first check, views.BodyParams), which
// recurses once a level, and the goroutine's stack passed Go's 1 GB limit
// ("fatal error: stack overflow", which no recover catches): one request
// of any user allowed to write (to read, for _all_docs) stopped the node.
// Each request runs in a child process, so that the crash fails this test
// rather than end the package's run.
func TestVeryDeepJSONDoesNotCrashServer(t *testing.T) {
	if which := os.Getenv(deepJSONChildEnv); which != "" {
		deepJSONRequest(t, which)
		return
	}
	for _, which := range []string{"put", "bulk", "all_docs"} {
		t.Run(which, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestVeryDeepJSONDoesNotCrashServer$", "-test.count=1")
			cmd.Env = append(os.Environ(), deepJSONChildEnv+"="+which)
			out, err := cmd.CombinedOutput()
			if err == nil {
				return
			}
			// The crash and the first frame (the innermost), else the end.
			var lines []string
			for line := range strings.SplitSeq(string(out), "\n") {
				if len(lines) < 3 && (strings.Contains(line, "fatal error") || strings.Contains(line, "gjson.")) {
					lines = append(lines, strings.TrimSpace(line))
				}
			}
			s := strings.Join(lines, "\n")
			if len(lines) == 0 {
				s = string(out[max(0, len(out)-2000):])
			}
			t.Fatalf("the server's process failed (%v):\n%s", err, s)
		})
	}
}

// deepJSONRequest sends the deep request named which to a fresh server and
// checks its answer, and that the server answers after it.
func deepJSONRequest(t *testing.T, which string) {
	f := newFixture(t)
	const depth = 10_000_000
	deep := strings.Repeat("[", depth) + strings.Repeat("]", depth)
	switch which {
	case "put":
		st, _, body := f.do("PUT", "/default/docs/deep", "application/octet-stream", deep)
		if st != 400 || !strings.Contains(body, "max depth") {
			t.Errorf("PUT of JSON %d levels deep: %d %.300s, want 400 exceeded max depth", depth, st, body)
		}
	case "bulk":
		res := f.bulkLines(`{"op":"upsert","id":"bdeep","doc":` + deep + "}\n")
		if len(res) != 1 || res[0]["error"] != "bad_request" {
			t.Errorf("_bulk line of JSON %d levels deep: %v, want bad_request", depth, res)
		}
	case "all_docs":
		st, _, body := f.do("POST", "/default/_all_docs", "application/json", `{"keys":`+strings.Repeat("[", 8<<20-100))
		if st != 400 {
			t.Errorf("POST _all_docs of an 8 MiB body nesting arrays: %d %.300s, want 400", st, body)
		}
	}
	if st, _, body := f.do("PUT", "/default/docs/after", "", "1"); st != 201 {
		t.Errorf("the server after the deep request: %d %.300s", st, body)
	}
}
