package logtest_test

import (
	"sync"
	"testing"

	"github.com/mayflydb/mayfly/internal/logtest"
)

// Records finds the records logged with one message, with their attributes,
// in order, and leaves out the rest and those below info level.
func TestRecords(t *testing.T) {
	var logs logtest.Buffer
	l := logs.Logger()
	l.Info("bucket created", "bucket", "a", "max_ttl", 60)
	l.Debug("bucket created", "bucket", "hidden")
	l.Warn("something else", "bucket", "a")
	l.Info("bucket created", "bucket", "b")
	got := logs.Records(t, "bucket created")
	if len(got) != 2 {
		t.Fatalf("%d records, want 2: %s", len(got), logs.String())
	}
	if got[0]["level"] != "INFO" || got[0]["bucket"] != "a" || got[0]["max_ttl"] != float64(60) || got[1]["bucket"] != "b" {
		t.Errorf("records = %v", got)
	}
	if got := logs.Records(t, "never logged"); len(got) != 0 {
		t.Errorf("records for a message never logged: %v", got)
	}
}

// Loggers on several goroutines can write while the test reads.
func TestConcurrent(t *testing.T) {
	var logs logtest.Buffer
	l := logs.Logger()
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				l.Info("tick")
				_ = logs.String()
			}
		}()
	}
	wg.Wait()
	if got := logs.Records(t, "tick"); len(got) != 200 {
		t.Errorf("%d records, want 200", len(got))
	}
}
