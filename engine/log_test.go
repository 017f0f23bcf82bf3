package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// logBuffer is a goroutine-safe buffer a JSON slog handler writes to.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// records returns the logged lines whose msg is msg, decoded.
func (l *logBuffer) records(t *testing.T, msg string) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for line := range strings.Lines(l.buf.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

// Creating and deleting a bucket logs one info line each, naming it.
func TestLogBucketCreatedDeleted(t *testing.T) {
	var logs logBuffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	eng, err := engine.Open(t.TempDir(), &engine.Options{Clock: engine.NewFakeClock(t0), NoSync: true, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	defer closeChecked(t, eng)
	ctx := context.Background()
	s := engine.DefaultBucketSettings("travel")
	s.MaxTTL = 60
	if _, err := eng.CreateBucket(ctx, s); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.CreateBucket(ctx, s); err == nil {
		t.Fatal("creating the bucket twice succeeded")
	}
	created := logs.records(t, "bucket created")
	if len(created) != 1 {
		t.Fatalf("%d \"bucket created\" lines, want 1: %s", len(created), logs.buf.String())
	}
	if c := created[0]; c["level"] != "INFO" || c["bucket"] != "travel" || c["type"] != "couchbase" || c["max_ttl"] != float64(60) {
		t.Errorf("bucket created line = %v", c)
	}
	if err := eng.DeleteBucket(ctx, "travel"); err != nil {
		t.Fatal(err)
	}
	if err := eng.DeleteBucket(ctx, "travel"); err == nil {
		t.Fatal("deleting the bucket twice succeeded")
	}
	deleted := logs.records(t, "bucket deleted")
	if len(deleted) != 1 || deleted[0]["bucket"] != "travel" || deleted[0]["level"] != "INFO" {
		t.Errorf("bucket deleted lines = %v", deleted)
	}
}
