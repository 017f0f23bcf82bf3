package httpapi

import (
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/mayflydb/mayfly/audit"
	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/internal/reason"
)

// Refusals before authentication cost bounded disk: the first refusal of a
// source address, user name and reason in an interval is logged (and, for a
// login with a user name, audited) at once; the ones after it in the same
// interval are only counted, and once the interval is over one line per key
// says how many there were. A caller's user name is cut to
// auth.MaxUserName bytes, and a path to maxLoggedPath, wherever a line
// holds them.

// DefaultFailureLogInterval is Options.FailureLogInterval's default, in
// seconds.
const DefaultFailureLogInterval = 60

const (
	// maxLoggedPath is the most of a request's path, Host or Origin a log
	// line holds.
	maxLoggedPath = 256
	// maxFailureKeys bounds the keys counted in one interval; beyond it
	// every new key counts as source and user "(many)".
	maxFailureKeys = 4096
	// maxUsersPerSource bounds the user names counted per source in one
	// interval; beyond it a source's new names count as user "(many)".
	maxUsersPerSource = 16
	// manyKeys stands for the sources or names beyond the bounds (no user
	// name holds parentheses).
	manyKeys = "(many)"
)

// failKey is what refusals are counted by.
type failKey struct{ reason, source, user string }

// failureLog counts refusals per key and interval (engine-clock seconds).
type failureLog struct {
	interval int64
	due      atomic.Int64 // when the current interval ends; 0: nothing counted

	mu struct {
		sync.Mutex
		start int64
		keys  map[failKey]int // refusals counted this interval
		users map[string]int  // distinct user names per source this interval
	}
}

func newFailureLog(interval int64) *failureLog {
	if interval <= 0 {
		interval = DefaultFailureLogInterval
	}
	l := &failureLog{interval: interval}
	l.mu.keys = map[failKey]int{}
	l.mu.users = map[string]int{}
	return l
}

// failSummary is one key's count over an interval that has ended.
type failSummary struct {
	key          failKey
	start, count int64 // count: the refusals after the first (logged at once)
}

// note counts one refusal of k at now. It returns the key it was counted
// under (k, or k coarsened past the bounds), whether it is that key's first
// in the interval (to be written now), and the summaries of an interval that
// ended.
func (l *failureLog) note(now int64, k failKey) (failKey, bool, []failSummary) {
	l.mu.Lock()
	defer l.mu.Unlock()
	done := l.rollLocked(now)
	if _, ok := l.mu.keys[k]; !ok {
		switch {
		case len(l.mu.keys) >= maxFailureKeys:
			k.source, k.user = manyKeys, manyKeys
		case k.user != "" && l.mu.users[k.source] >= maxUsersPerSource:
			k.user = manyKeys
		}
	}
	n, seen := l.mu.keys[k]
	if !seen && k.user != "" && k.user != manyKeys {
		l.mu.users[k.source]++
	}
	l.mu.keys[k] = n + 1
	if l.due.Load() == 0 {
		l.due.Store(l.mu.start + l.interval)
	}
	return k, !seen, done
}

// takeDue returns the summaries of an interval that has ended by now.
func (l *failureLog) takeDue(now int64) []failSummary {
	if d := l.due.Load(); d == 0 || now < d {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rollLocked(now)
}

// rollLocked starts a new interval if the current one has ended, returning
// its summaries (keys refused more than once).
// REQUIRES: l.mu.
func (l *failureLog) rollLocked(now int64) []failSummary {
	if now >= l.mu.start && now < l.mu.start+l.interval {
		return nil
	}
	var out []failSummary
	for k, n := range l.mu.keys {
		if n > 1 {
			out = append(out, failSummary{key: k, start: l.mu.start, count: int64(n - 1)})
		}
	}
	l.mu.start = now
	clear(l.mu.keys)
	clear(l.mu.users)
	l.due.Store(0)
	return out
}

// sourceOf is a request's source address, without its port.
func sourceOf(r *http.Request) string {
	if h, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return h
	}
	return capString(r.RemoteAddr, 64)
}

// capString cuts s to at most n bytes on a rune boundary, ending in "…"
// when cut, each run of bytes that is not UTF-8 shown as "?"
// (reason.Cap, as auth.ShownName).
func capString(s string, n int) string {
	return reason.Cap(s, n)
}

// failMessage is the log message of a refusal at the door.
func failMessage(reason string) string {
	switch reason {
	case refusedUnauthenticated, refusedThrottled, refusedAuthBusy, refusedUsersPending:
		return "authentication failed"
	}
	return "request refused"
}

// refusedAtDoor logs (and audits, for a login with a user name) a refusal
// before authentication, aggregated as the failureLog says.
func (s *server) refusedAtDoor(r *http.Request, reason, user string, err error) {
	k := failKey{reason: reason, source: sourceOf(r), user: auth.ShownName(user)}
	k, first, done := s.fails.note(s.eng.Clock().Now(), k)
	s.writeFailSummaries(r, done)
	if !first {
		return
	}
	args := []any{"reason", k.reason, "source", k.source, "user", k.user, "method", capString(r.Method, 16), "path", capString(r.URL.Path, maxLoggedPath),
		"note", "more from this source and user in the next " + strconv.FormatInt(s.fails.interval, 10) + "s are counted, not logged"}
	if err != nil {
		args = append(args, "err", err)
	}
	s.log.Warn(failMessage(k.reason), args...)
	if user != "" {
		// Never the password; the request is refused whether or not this
		// is written.
		e := s.event(r, audit.Event{Action: audit.ActionLoginFailed, Target: k.user, After: map[string]string{"reason": k.reason}})
		e.Remote = k.source
		if err := s.auditLog.Record(r.Context(), e); err != nil {
			s.log.Error("audit log", "err", err, "action", e.Action)
		}
	}
}

// flushFailures writes the summaries of an interval that has ended, if any.
// Every request calls it: it costs an atomic load until then.
func (s *server) flushFailures(r *http.Request) {
	if s.fails.due.Load() == 0 {
		return
	}
	s.writeFailSummaries(r, s.fails.takeDue(s.eng.Clock().Now()))
}

func (s *server) writeFailSummaries(r *http.Request, done []failSummary) {
	for _, d := range done {
		s.log.Warn(failMessage(d.key.reason)+", repeated", "reason", d.key.reason, "source", d.key.source, "user", d.key.user,
			"count", d.count, "since", d.start, "seconds", s.fails.interval)
		if d.key.user == "" {
			continue
		}
		e := audit.Event{Time: s.eng.Clock().Now(), Remote: d.key.source, Action: audit.ActionLoginFailed, Target: d.key.user,
			After: map[string]any{"reason": d.key.reason, "count": d.count, "since": d.start, "seconds": s.fails.interval}}
		if err := s.auditLog.Record(r.Context(), e); err != nil {
			s.log.Error("audit log", "err", err, "action", e.Action)
		}
	}
}
