package kv_test

import (
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"hash"
	"testing"

	"github.com/couchbase/gocbcore/v10/memd"
	scram "github.com/couchbase/gocbcore/v10/scram"

	"github.com/mayflydb/mayfly/audit"
	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/kv"
)

// scramLogin runs a SCRAM exchange with gocbcore's client and returns the
// final status.
func (c *client) scramLogin(mech string, h func() hash.Hash, user, pass string) memd.StatusCode {
	c.t.Helper()
	sc := scram.NewClient(h, user, pass)
	sc.Step(nil)
	r := c.do(&memd.Packet{Command: memd.CmdSASLAuth, Key: []byte(mech), Value: sc.Out()})
	if r.Status != memd.StatusAuthContinue {
		c.t.Fatalf("%s first step: status %v (%s)", mech, r.Status, r.Value)
	}
	if !sc.Step(r.Value) {
		c.t.Fatalf("%s: client stopped: %v", mech, sc.Err())
	}
	r = c.do(&memd.Packet{Command: memd.CmdSASLStep, Key: []byte(mech), Value: sc.Out()})
	if r.Status == memd.StatusSuccess {
		// The client checks the server's signature.
		if sc.Step(r.Value) || sc.Err() != nil {
			c.t.Fatalf("%s: server signature refused: %v", mech, sc.Err())
		}
	}
	return r.Status
}

func TestScram(t *testing.T) {
	f := newFixture(t)
	for _, m := range []struct {
		name string
		h    func() hash.Hash
	}{{"SCRAM-SHA512", sha512.New}, {"SCRAM-SHA256", sha256.New}, {"SCRAM-SHA1", sha1.New}} {
		c := f.dial(t)
		c.hello(memd.FeatureXerror)
		if st := c.scramLogin(m.name, m.h, readerUser, readerPass); st != memd.StatusSuccess {
			t.Fatalf("%s: status %v", m.name, st)
		}
		c.expect(&memd.Packet{Command: memd.CmdSelectBucket, Key: []byte(bucketName)}, memd.StatusSuccess)
		c.expect(&memd.Packet{Command: memd.CmdGet, Key: []byte("k")}, memd.StatusKeyNotFound)

		c = f.dial(t)
		if st := c.scramLogin(m.name, m.h, readerUser, "wrong"); st != memd.StatusAuthError {
			t.Fatalf("%s with a wrong password: status %v", m.name, st)
		}
		c.expect(&memd.Packet{Command: memd.CmdSelectBucket, Key: []byte(bucketName)}, memd.StatusAccessError)
		if st := c.scramLogin(m.name, m.h, "nobody", "whatever"); st != memd.StatusAuthError {
			t.Fatalf("%s for an unknown user: status %v", m.name, st)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.audited) != 6 || f.audited[0].Action != audit.ActionLoginFailed || f.audited[1].User != "nobody" {
		t.Fatalf("audited %+v", f.audited)
	}
	// A step without a first message fails.
	c := f.dial(t)
	c.expect(&memd.Packet{Command: memd.CmdSASLStep, Key: []byte("SCRAM-SHA512"), Value: []byte("c=biws,r=x,p=eA==")}, memd.StatusAuthError)
}

// SCRAM prepares names and passwords with SASLprep: a user whose name and
// password were set decomposed logs in with them composed (as a client
// that prepares sends them).
func TestScramSASLPrep(t *testing.T) {
	var users *auth.Store
	f := newFixture(t, func(o *kv.Options) { users = o.Auth })
	roles, err := auth.ParseRoles("data_reader[" + bucketName + "]")
	if err != nil {
		t.Fatal(err)
	}
	if err := users.PutUser("zo\u00eb", "", "cafe\u0301\u00a0noir", roles); err != nil {
		t.Fatal(err)
	}
	c := f.dial(t)
	if st := c.scramLogin("SCRAM-SHA256", sha256.New, "zoe\u0308", "caf\u00e9 noir"); st != memd.StatusSuccess {
		t.Fatalf("prepared name and password: status %v", st)
	}
	c.expect(&memd.Packet{Command: memd.CmdSelectBucket, Key: []byte(bucketName)}, memd.StatusSuccess)
	c = f.dial(t)
	if st := c.scramLogin("SCRAM-SHA256", sha256.New, "zo\u00eb", "cafe noir"); st != memd.StatusAuthError {
		t.Fatalf("another password: status %v", st)
	}
}
