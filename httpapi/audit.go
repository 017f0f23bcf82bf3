package httpapi

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"

	"github.com/mayflydb/mayfly/audit"
)

// Audit semantics. Every administrative action is recorded in the audit log
// BEFORE it is done, with the state before it and the state it asks for:
//
//   - if the record cannot be written (the log closed, broken by an earlier
//     write error, the disk full), the action is not done and the client is
//     answered 500 {"error": "audit_failed"};
//   - if the record is written and the action then fails, a follow-up line
//     (same action, bucket and target; "outcome": "failed", "ref": the
//     intent's seq, "error": why) is appended, best effort;
//   - so an intent without a failed follow-up was done — or the server
//     crashed between the record and the action, which the log cannot tell.
//
// Requests refused before the action is tried (bad parameters, a missing
// bucket, nothing to change) are not recorded.

// auditFailedCode is the error code of an action refused because its
// record failed.
const auditFailedCode = "audit_failed"

// errAuditFailed answers an action refused because its record failed.
func errAuditFailed(err error) error {
	return &httpError{status: http.StatusInternalServerError, code: auditFailedCode,
		reason: "the audit log cannot be written, so the change was not made: " + err.Error()}
}

// requestUser is the user a request is authenticated as ("" when none).
func requestUser(r *http.Request) string {
	if p := principalOf(r); p != nil {
		return p.Name
	}
	return ""
}

// event fills in an Event's time, user and remote address from the request.
func (s *server) event(r *http.Request, e audit.Event) audit.Event {
	e.Time = s.eng.Clock().Now()
	e.User = requestUser(r)
	e.Remote = r.RemoteAddr
	return e
}

// audit records e (time, user and remote filled in from r): for events that
// are not an intent, such as a failed login. Its error must refuse whatever
// it records.
func (s *server) audit(r *http.Request, e audit.Event) error {
	if err := s.auditLog.Record(r.Context(), s.event(r, e)); err != nil {
		s.log.Error("audit log", "err", err, "action", e.Action)
		return errAuditFailed(err)
	}
	return nil
}

// intend records the intent of an administrative action about to be done.
// On failure it returns the error to answer (audit_failed): the action must
// not be done. Otherwise the caller does the action and passes its error to
// settle.
func (s *server) intend(r *http.Request, e audit.Event) (audit.Intent, error) {
	in, err := s.auditLog.Intend(r.Context(), s.event(r, e))
	if err != nil {
		s.log.Error("audit log: action refused", "err", err, "action", e.Action, "bucket", e.Bucket, "target", e.Target)
		return in, errAuditFailed(err)
	}
	return in, nil
}

// settle records that an intended action failed (nothing if err is nil).
func (s *server) settle(r *http.Request, in audit.Intent, err error) {
	if err := in.Failed(r.Context(), err); err != nil {
		s.log.Error("audit log: recording a failed action", "err", err, "seq", in.Seq())
	}
}

// maxAuditedBody is the largest design document kept whole in a record;
// a larger one (or one that is not JSON) is recorded by size and hash.
const maxAuditedBody = 64 << 10

// auditBody is a document body as an audit record holds it.
func auditBody(b []byte) any {
	if b == nil {
		return nil
	}
	if len(b) <= maxAuditedBody && json.Valid(b) {
		return json.RawMessage(b)
	}
	h := sha256.Sum256(b)
	return map[string]any{"bytes": len(b), "sha256": hex.EncodeToString(h[:])}
}
