package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
)

// FileName is the audit log's usual name inside the data directory.
const FileName = "audit.log"

// Event is one audited change.
type Event struct {
	// Time is when the change was made, in Unix seconds, from the caller's
	// clock (the engine clock).
	Time int64 `json:"time"`
	// Bucket is the bucket whose setting changed ("" for a server-wide one).
	Bucket string `json:"bucket"`
	// Setting names the setting, as the API does (exp_pager_stime…).
	Setting string `json:"setting"`
	// Old is the value before the change; it must encode as JSON.
	Old any `json:"old"`
	// New is the value after the change; it must encode as JSON.
	New any `json:"new"`
	// Remote is the address of the client that asked for the change, or ""
	// for the command line or the server itself.
	Remote string `json:"remote"`
}

// Log appends Events to a file as JSON lines. It is safe for concurrent use;
// records are written whole, one at a time, in the order Record is called. A
// nil *Log ignores records.
type Log struct {
	path string

	mu struct {
		sync.Mutex
		f *os.File // nil once closed
	}
}

// Open opens the audit log at path for appending, creating the file (mode
// 0600) if needed. The directory must exist.
func Open(path string) (*Log, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit: open: %w", err)
	}
	l := &Log{path: path}
	l.mu.f = f
	return l, nil
}

// Path returns the file the log appends to ("" for a nil Log).
func (l *Log) Path() string {
	if l == nil {
		return ""
	}
	return l.path
}

// Record appends e as one JSON line and syncs the file before returning. It
// returns ctx's error without writing if ctx has already ended, an error if
// Old or New cannot be encoded, and ErrClosed after Close. On a nil Log it
// does nothing.
func (l *Log) Record(ctx context.Context, e Event) error {
	if l == nil {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	line, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("audit: encode %s: %w", e.Setting, err)
	}
	line = append(line, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.f == nil {
		return ErrClosed
	}
	if _, err := l.mu.f.Write(line); err != nil {
		return fmt.Errorf("audit: write %s: %w", l.path, err)
	}
	if err := l.mu.f.Sync(); err != nil {
		return fmt.Errorf("audit: sync %s: %w", l.path, err)
	}
	return nil
}

// Close closes the file. Later Records return ErrClosed; Close may be called
// more than once, and on a nil Log.
func (l *Log) Close() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.f == nil {
		return nil
	}
	err := l.mu.f.Close()
	l.mu.f = nil
	if err != nil {
		return fmt.Errorf("audit: close %s: %w", l.path, err)
	}
	return nil
}
