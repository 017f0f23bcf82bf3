package views

import (
	"log/slog"
	"time"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/internal/ratelimit"
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
	attrs  []any            // added to every line
	limit  *ratelimit.Keyed // keyed by message: a few constant strings
}

func newLimitedLog(logger *slog.Logger, clock engine.Clock, attrs ...any) *limitedLog {
	now := func() time.Time { return time.Unix(clock.Now(), 0) }
	return &limitedLog{logger: logger, attrs: attrs, limit: ratelimit.NewKeyed(1.0/errLogEvery, errLogBurst, now)}
}

// warn writes msg at warning level unless msg is over its budget.
func (l *limitedLog) warn(msg string, args ...any) {
	ok, dropped := l.limit.Allow(msg)
	if !ok {
		return
	}
	args = append(args, l.attrs...)
	if dropped > 0 {
		args = append(args, "suppressed", dropped)
	}
	l.logger.Warn(msg, args...)
}
