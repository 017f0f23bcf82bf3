package httpapi_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// deepJSONChildEnv marks the process TestVeryDeepJSONDoesNotCrashServer
// starts to send the requests: a crash ends that process, not this one.
const deepJSONChildEnv = "MAYFLY_TEST_DEEP_JSON_CHILD"

// TestVeryDeepJSONDoesNotCrashServer: a PUT body or a _bulk line of JSON
// nested ten million levels deep (20 MB, within the 20 MiB value limit) is
// refused as any value deeper than 10,000 levels is (a 400, a _bulk line's
// bad_request), and the server goes on answering. A review found that it
// crashed the server instead: the body was checked with gjson's validator
// (engine.DetectType, and parseBulkLine's first check), which recurses once
// a level, and the goroutine's stack passed Go's 1 GB limit ("fatal error:
// stack overflow", which no recover catches): one request of any user
// allowed to write stopped the node. The requests run in a child process,
// so that the crash fails this test rather than end the package's run.
func TestVeryDeepJSONDoesNotCrashServer(t *testing.T) {
	if os.Getenv(deepJSONChildEnv) == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestVeryDeepJSONDoesNotCrashServer$", "-test.count=1")
		cmd.Env = append(os.Environ(), deepJSONChildEnv+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
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
		}
		return
	}
	f := newFixture(t)
	const depth = 10_000_000
	deep := strings.Repeat("[", depth) + strings.Repeat("]", depth)
	st, _, body := f.do("PUT", "/default/docs/deep", "application/octet-stream", deep)
	if st != 400 || !strings.Contains(body, "max depth") {
		t.Errorf("PUT of JSON %d levels deep: %d %.300s, want 400 exceeded max depth", depth, st, body)
	}
	res := f.bulkLines(`{"op":"upsert","id":"bdeep","doc":` + deep + "}\n" + `{"op":"upsert","id":"after","doc":1}` + "\n")
	if len(res) != 2 || res[0]["error"] != "bad_request" || res[1]["error"] != nil {
		t.Errorf("_bulk line of JSON %d levels deep, then a good line: %v", depth, res)
	}
	if st, _, body := f.do("GET", "/default/docs/after", "", ""); st != 200 || body != "1" {
		t.Errorf("the server after the deep requests: %d %.300s", st, body)
	}
}
