package kv_test

import (
	"encoding/binary"
	"testing"

	"github.com/couchbase/gocbcore/v10/memd"
)

// TestGetLockedUnlock drives GET_LOCKED and UNLOCK_KEY over TCP: the lock
// CAS, LOCKED for writes without it (the read-modify-write commands
// included, which must stop rather than retry), CAS all ones on a plain
// read, NOT_LOCKED, and the lock's end by the clock.
func TestGetLockedUnlock(t *testing.T) {
	f := newFixture(t)
	c := f.dial(t)
	c.hello(memd.FeatureXerror, memd.FeatureJSON)
	c.login(adminUser, adminPass)
	lockFor := func(key string, secs uint32, want memd.StatusCode) *memd.Packet {
		return c.expect(&memd.Packet{Command: memd.CmdGetLocked, Key: []byte(key), Extras: binary.BigEndian.AppendUint32(nil, secs)}, want)
	}

	cas := c.set(memd.CmdSet, "k", "5", 7, 0, 0, memd.StatusSuccess)
	r := lockFor("k", 10, memd.StatusSuccess)
	lockCAS := r.Cas
	if string(r.Value) != "5" || binary.BigEndian.Uint32(r.Extras) != 7 || lockCAS == cas || lockCAS == 0 {
		t.Fatalf("GET_LOCKED: %q extras %x cas %x (was %x)", r.Value, r.Extras, lockCAS, cas)
	}
	lockFor("k", 10, memd.StatusLocked)
	r = c.expect(&memd.Packet{Command: memd.CmdGet, Key: []byte("k")}, memd.StatusSuccess)
	if r.Cas != 0xffffffffffffffff || string(r.Value) != "5" {
		t.Fatalf("GET of a locked document: cas %x value %q", r.Cas, r.Value)
	}
	r = c.expect(&memd.Packet{Command: memd.CmdGetMeta, Key: []byte("k")}, memd.StatusSuccess)
	if r.Cas != 0xffffffffffffffff {
		t.Fatalf("GET_META of a locked document: cas %x", r.Cas)
	}

	c.set(memd.CmdSet, "k", "6", 0, 0, 0, memd.StatusLocked)
	c.set(memd.CmdReplace, "k", "6", 0, 0, cas, memd.StatusLocked)
	c.expect(&memd.Packet{Command: memd.CmdDelete, Key: []byte("k")}, memd.StatusLocked)
	c.expect(&memd.Packet{Command: memd.CmdTouch, Key: []byte("k"), Extras: binary.BigEndian.AppendUint32(nil, 10)}, memd.StatusLocked)
	c.expect(&memd.Packet{Command: memd.CmdAppend, Key: []byte("k"), Value: []byte("0")}, memd.StatusLocked)
	incr := func(cas uint64, want memd.StatusCode) *memd.Packet {
		ext := binary.BigEndian.AppendUint64(nil, 1)
		ext = binary.BigEndian.AppendUint64(ext, 0)
		ext = binary.BigEndian.AppendUint32(ext, 0)
		return c.expect(&memd.Packet{Command: memd.CmdIncrement, Key: []byte("k"), Extras: ext, Cas: cas}, want)
	}
	incr(0, memd.StatusLocked)
	c.set(memd.CmdSet, "j", `{"a":1}`, 0, 0, 0, memd.StatusSuccess)
	jl := lockFor("j", 0, memd.StatusSuccess)
	ext, val := subdocPathKV("n", "1")
	c.expect(&memd.Packet{Command: memd.CmdSubDocDictSet, Key: []byte("j"), Extras: ext, Value: val}, memd.StatusLocked)
	c.expect(&memd.Packet{Command: memd.CmdSubDocDictSet, Key: []byte("j"), Extras: ext, Value: val, Cas: jl.Cas}, memd.StatusSuccess)
	if g := c.expect(&memd.Packet{Command: memd.CmdGet, Key: []byte("j")}, memd.StatusSuccess); string(g.Value) != `{"a":1,"n":1}` {
		t.Fatalf("after the holder's sub-document write: %s", g.Value)
	}

	// UNLOCK_KEY with a wrong CAS is LOCKED; the holder's increment with
	// the lock CAS goes through and ends the lock.
	c.expect(&memd.Packet{Command: memd.CmdUnlockKey, Key: []byte("k"), Cas: cas}, memd.StatusLocked)
	r = incr(lockCAS, memd.StatusSuccess)
	if binary.BigEndian.Uint64(r.Value) != 6 {
		t.Fatalf("the holder's increment: %d", binary.BigEndian.Uint64(r.Value))
	}
	c.expect(&memd.Packet{Command: memd.CmdUnlockKey, Key: []byte("k"), Cas: lockCAS}, memd.StatusNotLocked)
	c.expect(&memd.Packet{Command: memd.CmdUnlockKey, Key: []byte("missing"), Cas: 1}, memd.StatusKeyNotFound)
	lockFor("missing", 0, memd.StatusKeyNotFound)

	// Lock, unlock, write.
	r = lockFor("k", 0, memd.StatusSuccess)
	c.expect(&memd.Packet{Command: memd.CmdUnlockKey, Key: []byte("k"), Cas: r.Cas}, memd.StatusSuccess)
	c.set(memd.CmdSet, "k", "7", 0, 0, 0, memd.StatusSuccess)

	// The holder's append with the lock CAS.
	r = lockFor("k", 0, memd.StatusSuccess)
	c.expect(&memd.Packet{Command: memd.CmdAppend, Key: []byte("k"), Value: []byte("0"), Cas: r.Cas}, memd.StatusSuccess)
	if g := c.expect(&memd.Packet{Command: memd.CmdGet, Key: []byte("k")}, memd.StatusSuccess); string(g.Value) != "70" || g.Cas == 0xffffffffffffffff {
		t.Fatalf("after the holder's append: %q cas %x", g.Value, g.Cas)
	}

	// A lock of 5 s ends when the clock passes it.
	lockFor("k", 5, memd.StatusSuccess)
	f.clock.Advance(4)
	c.set(memd.CmdSet, "k", "8", 0, 0, 0, memd.StatusLocked)
	f.clock.Advance(1)
	c.set(memd.CmdSet, "k", "8", 0, 0, 0, memd.StatusSuccess)

	// Bad extras are EINVAL, and the connection goes on.
	c.expect(&memd.Packet{Command: memd.CmdGetLocked, Key: []byte("k"), Extras: []byte{1}}, memd.StatusInvalidArgs)
	c.expect(&memd.Packet{Command: memd.CmdNoop}, memd.StatusSuccess)
}

// subdocPathKV is a single-path sub-document request's extras (path length,
// no flags) and value (path then value).
func subdocPathKV(path, value string) ([]byte, []byte) {
	ext := binary.BigEndian.AppendUint16(nil, uint16(len(path)))
	ext = append(ext, 0)
	return ext, append([]byte(path), value...)
}
