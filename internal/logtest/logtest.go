// Package logtest captures what a component logs so a test can check it: a
// goroutine-safe buffer for a slog handler to write to, and a lookup of the
// JSON records logged with a given message.
package logtest

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// Buffer is a bytes.Buffer safe for a logger (or any writer) and a test to
// use at once. The zero value is ready to use.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p to the buffer.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Logger returns a logger that writes JSON records at info level and above
// to b, for Records to read back.
func (b *Buffer) Logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(b, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// Records returns the JSON records written so far whose msg is msg, decoded
// (numbers come back as float64, the level as "INFO", "WARN" and so on). A
// line that is not JSON fails the test.
func (b *Buffer) Records(t testing.TB, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.Lines(b.String()) {
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

// WaitRecords is Records once at least n records of msg are written, for a
// line logged after what the test saw (the end of a build that a query's
// answer did not wait for): it polls for up to a minute, then returns
// what there is, for the test to judge.
func (b *Buffer) WaitRecords(t testing.TB, msg string, n int) []map[string]any {
	t.Helper()
	deadline := time.Now().Add(time.Minute) // wall clock: bounds a wait for another goroutine's log line
	for {
		recs := b.Records(t, msg)
		if len(recs) >= n || time.Now().After(deadline) { // wall clock: as above
			return recs
		}
		time.Sleep(10 * time.Millisecond)
	}
}
