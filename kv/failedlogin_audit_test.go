package kv_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/couchbase/gocbcore/v10/memd"

	"github.com/mayflydb/mayfly/audit"
)

// maxThrottledRecords is the most login.failed records one source may add
// in these tests: the 30 failures auth.Throttle lets through before its
// back-off, and a few more should the back-off's first waits (1 s, 2 s, ...)
// pass on a slow machine.
const maxThrottledRecords = 40

// An unauthenticated client that sends failed SASL PLAIN logins with long
// user names, each one new, cannot make the audit log (an fsync'd file on
// the data disk) grow without bound: as at the HTTP door ("failed logins
// filling the disk" in the README), the failures from one address are
// throttled after 30 (auth.Throttle) and a user name is cut to 128 bytes
// (Couchbase's limit), so a record stays small. A review found that a name
// over 128 bytes skipped the throttle and was audited whole, twice (user
// and target), for every try: about 32 KiB of audit log per 16 KiB packet,
// at the speed of the connection.
func TestFailedLoginsWithLongNamesBoundTheAuditLog(t *testing.T) {
	f := newFixture(t)
	c := f.dial(t)
	const tries = 200
	for i := range tries {
		name := fmt.Sprintf("guess%03d-%s", i, strings.Repeat("x", 4<<10))
		c.expect(&memd.Packet{Command: memd.CmdSASLAuth, Key: []byte("PLAIN"), Value: []byte("\x00" + name + "\x00wrong")}, memd.StatusAuthError)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	records, longest, bytes := 0, 0, 0
	for _, e := range f.audited {
		if e.Action != audit.ActionLoginFailed {
			continue
		}
		records++
		n := max(len(e.User), len(e.Target))
		longest = max(longest, n)
		bytes += len(e.User) + len(e.Target)
	}
	if records > maxThrottledRecords {
		t.Errorf("%d failed logins from one address with new long names made %d login.failed records (%d bytes of names); want at most %d: the source's throttle stops the rest unchecked", tries, records, bytes, maxThrottledRecords)
	}
	if longest > 128 {
		t.Errorf("a login.failed record holds a user name of %d bytes; want it cut to 128 (Couchbase's limit), as the HTTP door cuts it", longest)
	}
}

// loginFailedRecords counts the fixture's login.failed records.
func (f *fixture) loginFailedRecords() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, e := range f.audited {
		if e.Action == audit.ActionLoginFailed {
			n++
		}
	}
	return n
}

// A SCRAM exchange whose final message does not carry the server's nonce
// fails like a wrong password: it counts in the source's throttle, so one
// address cannot add login.failed records to the audit log without bound
// (auth.Throttle: 30 failures from one source, then the next try waits). A
// review found that such a failure skipped the throttle and was audited
// every time, at the speed of the connection, whatever the user name.
func TestFailedScramWithWrongNonceIsThrottled(t *testing.T) {
	f := newFixture(t)
	c := f.dial(t)
	const tries = 100
	for i := range tries {
		c.expect(&memd.Packet{Command: memd.CmdSASLAuth, Key: []byte("SCRAM-SHA256"),
			Value: []byte(fmt.Sprintf("n,,n=nobody%d,r=clientnonce%d", i, i))}, memd.StatusAuthContinue)
		c.expect(&memd.Packet{Command: memd.CmdSASLStep, Key: []byte("SCRAM-SHA256"),
			Value: []byte("c=biws,r=notTheServersNonce,p=AAAA")}, memd.StatusAuthError)
	}
	if n := f.loginFailedRecords(); n > maxThrottledRecords {
		t.Errorf("%d SCRAM exchanges with a wrong nonce from one address made %d login.failed records; want at most %d: the source's throttle stops the rest", tries, n, maxThrottledRecords)
	}
}
