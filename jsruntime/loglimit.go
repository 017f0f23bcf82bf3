package jsruntime

import (
	"sync"
	"time"
)

// Limits on the log(...) helper, per design document (Program): a token
// bucket of LogBurst lines refilled at LogRate lines a second; a line over
// the budget is dropped (and counted, see Program.LogDropped); a line
// longer than MaxLogLine bytes is cut there.
const (
	LogRate    = 10
	LogBurst   = 100
	MaxLogLine = 1024
)

// logLimiter is a Program's token bucket for log lines.
type logLimiter struct {
	mu      sync.Mutex
	tokens  float64
	last    time.Time
	started bool
}

// allow takes a token if there is one.
func (l *logLimiter) allow(now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.started {
		l.started, l.tokens, l.last = true, LogBurst, now
	}
	l.tokens = min(LogBurst, l.tokens+now.Sub(l.last).Seconds()*LogRate)
	l.last = now
	if l.tokens < 1 {
		return false
	}
	l.tokens--
	return true
}

// LogDropped counts the log(...) lines of the program's functions dropped
// because they came faster than LogRate a second (beyond a burst of
// LogBurst).
func (pr *Program) LogDropped() int64 { return pr.logDropped.Load() }
