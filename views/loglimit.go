package views

import (
	"log/slog"
	"sync"

	"github.com/mayflydb/mayfly/engine"
)

// Limits on an index's warnings (map and reduce errors, failed catch-ups):
// each message has a token bucket of errLogBurst lines refilled at one line
// every errLogEvery seconds of the bucket's clock. A line over the budget is
// dropped; the next line of that message that gets through says how many
// were (suppressed). Every error still counts in _info, dropped or not.
const (
	errLogBurst = 10
	errLogEvery = 1 // seconds
)

// limitedLog is an index's rate-limited warning log.
type limitedLog struct {
	logger *slog.Logger
	clock  engine.Clock
	attrs  []any // added to every line

	mu    sync.Mutex
	byMsg map[string]*logTokens // keyed by message: a few constant strings
}

// logTokens is one message's token bucket.
type logTokens struct {
	tokens  int64
	last    int64 // clock second of the last refill
	dropped int64 // lines dropped since the last one written
}

func newLimitedLog(logger *slog.Logger, clock engine.Clock, attrs ...any) *limitedLog {
	return &limitedLog{logger: logger, clock: clock, attrs: attrs, byMsg: make(map[string]*logTokens)}
}

// warn writes msg at warning level unless msg is over its budget.
func (l *limitedLog) warn(msg string, args ...any) {
	now := l.clock.Now()
	l.mu.Lock()
	tb := l.byMsg[msg]
	if tb == nil {
		tb = &logTokens{tokens: errLogBurst, last: now}
		l.byMsg[msg] = tb
	}
	if now > tb.last {
		tb.tokens = min(errLogBurst, tb.tokens+(now-tb.last)/errLogEvery)
		tb.last = now
	}
	if tb.tokens == 0 {
		tb.dropped++
		l.mu.Unlock()
		return
	}
	tb.tokens--
	dropped := tb.dropped
	tb.dropped = 0
	l.mu.Unlock()
	args = append(args, l.attrs...)
	if dropped > 0 {
		args = append(args, "suppressed", dropped)
	}
	l.logger.Warn(msg, args...)
}
