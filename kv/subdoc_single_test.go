package kv_test

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/couchbase/gocbcore/v10/memd"

	"github.com/mayflydb/mayfly/engine"
)

// subdoc sends a single-path sub-document command: extras are the path's
// length, its flags and, for a mutation given one, the expiry.
func (c *client) subdoc(cmd memd.CmdCode, key, path, value string, flags memd.SubdocFlag, expiry *uint32, want memd.StatusCode) *memd.Packet {
	c.t.Helper()
	ext := binary.BigEndian.AppendUint16(nil, uint16(len(path)))
	ext = append(ext, byte(flags))
	if expiry != nil {
		ext = binary.BigEndian.AppendUint32(ext, *expiry)
	}
	return c.expect(&memd.Packet{Command: cmd, Key: []byte(key), Extras: ext, Value: []byte(path + value)}, want)
}

// The single-path sub-document commands answer with Couchbase's statuses
// and change only the path they name, through the same engine path as a
// write (expiry, CAS, the document's flags kept).
func TestSinglePathSubdoc(t *testing.T) {
	f := newFixture(t)
	c := f.dial(t)
	c.hello(memd.FeatureXerror, memd.FeatureJSON, memd.FeatureXattr, memd.FeatureSeqNo)
	c.login(adminUser, adminPass)
	cas := c.set(memd.CmdSet, "h", `{"name":"Ritz","rooms":[101,102],"n":1}`, 9, 0, 0, memd.StatusSuccess)
	c.set(memd.CmdSet, "raw", `not json`, 0, 0, 0, memd.StatusSuccess)

	// Lookups.
	r := c.subdoc(memd.CmdSubDocGet, "h", "rooms[1]", "", 0, nil, memd.StatusSuccess)
	if string(r.Value) != "102" || r.Cas != cas || r.Datatype != uint8(memd.DatatypeFlagJSON) {
		t.Fatalf("SUBDOC_GET: %s cas %d datatype %d", r.Value, r.Cas, r.Datatype)
	}
	c.subdoc(memd.CmdSubDocGet, "h", "nope", "", 0, nil, memd.StatusSubDocPathNotFound)
	c.subdoc(memd.CmdSubDocGet, "h", "name[0]", "", 0, nil, memd.StatusSubDocPathMismatch)
	c.subdoc(memd.CmdSubDocGet, "h", "a..b", "", 0, nil, memd.StatusSubDocPathInvalid)
	c.subdoc(memd.CmdSubDocGet, "raw", "a", "", 0, nil, memd.StatusSubDocNotJSON)
	c.subdoc(memd.CmdSubDocGet, "missing", "a", "", 0, nil, memd.StatusKeyNotFound)
	c.subdoc(memd.CmdSubDocExists, "h", "name", "", 0, nil, memd.StatusSuccess)
	c.subdoc(memd.CmdSubDocExists, "h", "nope", "", 0, nil, memd.StatusSubDocPathNotFound)
	if r := c.subdoc(memd.CmdSubDocGetCount, "h", "rooms", "", 0, nil, memd.StatusSuccess); string(r.Value) != "2" {
		t.Fatalf("SUBDOC_GET_COUNT: %s", r.Value)
	}
	if r := c.subdoc(memd.CmdSubDocGet, "h", "$document.flags", "", memd.SubdocFlagXattrPath, nil, memd.StatusSuccess); string(r.Value) != "9" {
		t.Fatalf("$document.flags: %s", r.Value)
	}
	c.subdoc(memd.CmdSubDocExists, "h", "$document.exptime", "", memd.SubdocFlagXattrPath, nil, memd.StatusSuccess)
	c.subdoc(memd.CmdSubDocGet, "h", "$nope", "", memd.SubdocFlagXattrPath, nil, memd.StatusSubDocXattrUnknownVAttr)

	// Mutations.
	exp := uint32(100)
	r = c.subdoc(memd.CmdSubDocDictAdd, "h", "stars", "5", 0, &exp, memd.StatusSuccess)
	if r.Cas == cas || len(r.Extras) != 16 {
		t.Fatalf("SUBDOC_DICT_ADD: cas %d extras %x", r.Cas, r.Extras)
	}
	if d, err := f.bucket.DefaultCollection().Get(context.Background(), "h"); err != nil || d.Expiration != f.clock.Now()+100 || d.Flags != 9 {
		t.Fatalf("after SUBDOC_DICT_ADD with an expiry: %+v, %v", d, err)
	}
	c.subdoc(memd.CmdSubDocDictAdd, "h", "stars", "4", 0, nil, memd.StatusSubDocPathExists)
	c.subdoc(memd.CmdSubDocDictSet, "h", "name", `"Savoy"`, 0, nil, memd.StatusSuccess)
	c.subdoc(memd.CmdSubDocDictSet, "h", "a.b", `1`, 0, nil, memd.StatusSubDocPathNotFound)
	c.subdoc(memd.CmdSubDocDictSet, "h", "a.b", `1`, memd.SubdocFlagMkDirP, nil, memd.StatusSuccess)
	c.subdoc(memd.CmdSubDocReplace, "h", "rooms[0]", `100`, 0, nil, memd.StatusSuccess)
	c.subdoc(memd.CmdSubDocReplace, "h", "nope", `1`, 0, nil, memd.StatusSubDocPathNotFound)
	c.subdoc(memd.CmdSubDocArrayPushLast, "h", "rooms", `103`, 0, nil, memd.StatusSuccess)
	c.subdoc(memd.CmdSubDocArrayPushFirst, "h", "rooms", `99`, 0, nil, memd.StatusSuccess)
	c.subdoc(memd.CmdSubDocArrayInsert, "h", "rooms[1]", `"x"`, 0, nil, memd.StatusSuccess)
	c.subdoc(memd.CmdSubDocArrayAddUnique, "h", "rooms", `103`, 0, nil, memd.StatusSubDocPathExists)
	c.subdoc(memd.CmdSubDocArrayAddUnique, "h", "rooms", `104`, 0, nil, memd.StatusSuccess)
	c.subdoc(memd.CmdSubDocArrayPushLast, "h", "name", `1`, 0, nil, memd.StatusSubDocPathMismatch)
	c.subdoc(memd.CmdSubDocDictSet, "h", "name", `not json`, 0, nil, memd.StatusSubDocCantInsert)
	if r := c.subdoc(memd.CmdSubDocCounter, "h", "n", "41", 0, nil, memd.StatusSuccess); string(r.Value) != "42" {
		t.Fatalf("SUBDOC_COUNTER: %s", r.Value)
	}
	c.subdoc(memd.CmdSubDocCounter, "h", "name", "1", 0, nil, memd.StatusSubDocPathMismatch)
	c.subdoc(memd.CmdSubDocCounter, "h", "n", "x", 0, nil, memd.StatusSubDocBadDelta)
	c.subdoc(memd.CmdSubDocDelete, "h", "stars", "", 0, nil, memd.StatusSuccess)
	c.subdoc(memd.CmdSubDocDelete, "h", "stars", "", 0, nil, memd.StatusSubDocPathNotFound)
	c.subdoc(memd.CmdSubDocDictSet, "raw", "a", `1`, 0, nil, memd.StatusSubDocNotJSON)
	c.subdoc(memd.CmdSubDocDictSet, "h", "$document.x", `1`, memd.SubdocFlagXattrPath, nil, memd.StatusNotSupported)
	c.subdoc(memd.CmdSubDocDictSet, "missing", "a", `1`, 0, nil, memd.StatusKeyNotFound)

	// A stale CAS changes nothing.
	p := &memd.Packet{Command: memd.CmdSubDocDictSet, Key: []byte("h"), Extras: []byte{0, 4, 0}, Value: []byte(`name"Old"`), Cas: cas}
	c.expect(p, memd.StatusKeyExists)
	// Extras that do not add up are EINVAL.
	c.expect(&memd.Packet{Command: memd.CmdSubDocGet, Key: []byte("h"), Extras: []byte{0, 9, 0}, Value: []byte("name")}, memd.StatusInvalidArgs)
	c.expect(&memd.Packet{Command: memd.CmdSubDocGet, Key: []byte("h"), Extras: []byte{0, 4, 0, 0, 0, 0, 0}, Value: []byte("name")}, memd.StatusInvalidArgs)

	d, err := f.bucket.DefaultCollection().Get(context.Background(), "h")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"name":"Savoy","rooms":[99,"x",100,102,103,104],"n":42,"a":{"b":1}}`
	// As in Couchbase, a mutation without an expiry clears it.
	if string(d.Value) != want || d.Flags != 9 || d.Expiration != 0 || d.Type != engine.TypeJSON {
		t.Fatalf("document %s flags %d expiration %d, want %s flags 9 no expiration", d.Value, d.Flags, d.Expiration, want)
	}
}
