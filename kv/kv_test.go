package kv_test

import (
	"context"
	"encoding/binary"
	"slices"
	"strings"
	"testing"

	"github.com/couchbase/gocbcore/v10/memd"

	"github.com/mayflydb/mayfly/audit"
	"github.com/mayflydb/mayfly/engine"
)

func TestBootstrap(t *testing.T) {
	f := newFixture(t)
	c := f.dial(t)

	got := c.hello(memd.FeatureXerror, memd.FeatureSelectBucket, memd.FeatureJSON, memd.FeatureSnappy, memd.FeatureCollections, memd.FeatureAltRequests, memd.FeatureDuplex)
	want := []memd.HelloFeature{memd.FeatureXerror, memd.FeatureSelectBucket, memd.FeatureJSON, memd.FeatureCollections, memd.FeatureAltRequests}
	if !slices.Equal(got, want) {
		t.Fatalf("HELLO took %v, want %v (no snappy, no duplex)", got, want)
	}

	r := c.expect(&memd.Packet{Command: memd.CmdGetErrorMap, Value: []byte{0, 2}}, memd.StatusSuccess)
	em := jsonOf(t, r.Value)
	errs, _ := em["errors"].(map[string]any)
	if em["version"] != float64(2) || errs["1"] == nil || errs["88"] == nil {
		t.Fatalf("error map: %s", r.Value)
	}

	r = c.expect(&memd.Packet{Command: memd.CmdSASLListMechs}, memd.StatusSuccess)
	if string(r.Value) != "SCRAM-SHA512 SCRAM-SHA256 SCRAM-SHA1 PLAIN" {
		t.Fatalf("mechanisms %q", r.Value)
	}

	// Nothing but bootstrap before authentication.
	c.expect(&memd.Packet{Command: memd.CmdSelectBucket, Key: []byte(bucketName)}, memd.StatusAccessError)
	c.expect(&memd.Packet{Command: memd.CmdGet, Key: []byte("k")}, memd.StatusAccessError)

	// A wrong password is AUTH_ERROR, and audited.
	r = c.expect(&memd.Packet{Command: memd.CmdSASLAuth, Key: []byte("PLAIN"), Value: []byte("\x00" + adminUser + "\x00wrong")}, memd.StatusAuthError)
	if !strings.Contains(string(r.Value), "authentication failed") {
		t.Fatalf("XERROR context %s", r.Value)
	}
	f.mu.Lock()
	if len(f.audited) != 1 || f.audited[0].Action != audit.ActionLoginFailed || f.audited[0].User != adminUser {
		t.Fatalf("audited %+v", f.audited)
	}
	f.mu.Unlock()
	c.expect(&memd.Packet{Command: memd.CmdSASLAuth, Key: []byte("CRAM-MD5"), Value: []byte("x")}, memd.StatusAuthError)

	c.login(adminUser, adminPass)
	c.expect(&memd.Packet{Command: memd.CmdSelectBucket, Key: []byte("nope")}, memd.StatusKeyNotFound)
	c.expect(&memd.Packet{Command: memd.CmdSelectBucket, Key: []byte(bucketName)}, memd.StatusSuccess)

	r = c.expect(&memd.Packet{Command: memd.CmdGetClusterConfig}, memd.StatusSuccess)
	cfg := jsonOf(t, r.Value)
	vbsm, _ := cfg["vBucketServerMap"].(map[string]any)
	vbm, _ := vbsm["vBucketMap"].([]any)
	port := f.addr[strings.LastIndexByte(f.addr, ':')+1:]
	if cfg["name"] != bucketName || cfg["nodeLocator"] != "vbucket" || vbsm["hashAlgorithm"] != "CRC" ||
		len(vbm) != f.bucket.NumPartitions() || !strings.Contains(string(r.Value), `"kv":`+port) ||
		!strings.Contains(string(r.Value), `"serverList":["$HOST:`+port+`"]`) {
		t.Fatalf("cluster config: %s", r.Value)
	}
	c.expect(&memd.Packet{Command: memd.CmdNoop}, memd.StatusSuccess)
	c.expect(&memd.Packet{Command: memd.CmdGetRandom}, memd.StatusUnknownCommand)
}

func TestKeyValue(t *testing.T) {
	f := newFixture(t)
	c := f.dial(t)
	c.hello(memd.FeatureXerror, memd.FeatureJSON, memd.FeatureSeqNo)
	c.login(adminUser, adminPass)

	cas := c.set(memd.CmdSet, "k", `{"a":1}`, 0xdead, 60, 0, memd.StatusSuccess)
	r := c.expect(&memd.Packet{Command: memd.CmdGet, Key: []byte("k")}, memd.StatusSuccess)
	if string(r.Value) != `{"a":1}` || binary.BigEndian.Uint32(r.Extras) != 0xdead || r.Cas != cas || r.Datatype != uint8(memd.DatatypeFlagJSON) {
		t.Fatalf("GET: %q flags %x cas %d/%d datatype %d", r.Value, r.Extras, r.Cas, cas, r.Datatype)
	}
	// The engine stored the expiry as every door does: now + 60.
	d, err := f.bucket.DefaultCollection().Get(context.Background(), "k")
	if err != nil || d.Expiration != f.clock.Now()+60 {
		t.Fatalf("engine: %+v, %v", d, err)
	}

	c.set(memd.CmdAdd, "k", "x", 0, 0, 0, memd.StatusKeyExists)
	c.set(memd.CmdReplace, "missing", "x", 0, 0, 0, memd.StatusKeyNotFound)
	c.set(memd.CmdSet, "k", "x", 0, 0, cas+1, memd.StatusKeyExists) // CAS mismatch
	cas2 := c.set(memd.CmdReplace, "k", "2", 0, 0, cas, memd.StatusSuccess)

	// A mutation answers its partition UUID and sequence number.
	r = c.expect(&memd.Packet{Command: memd.CmdTouch, Key: []byte("k"), Extras: binary.BigEndian.AppendUint32(nil, 10)}, memd.StatusSuccess)
	if len(r.Extras) != 16 || binary.BigEndian.Uint64(r.Extras) != f.bucket.UUID() || r.Cas == cas2 {
		t.Fatalf("TOUCH: extras %x cas %d", r.Extras, r.Cas)
	}
	r = c.expect(&memd.Packet{Command: memd.CmdGAT, Key: []byte("k"), Extras: binary.BigEndian.AppendUint32(nil, 100)}, memd.StatusSuccess)
	if string(r.Value) != "2" {
		t.Fatalf("GAT: %q", r.Value)
	}

	// Counters.
	ctr := func(cmd memd.CmdCode, key string, delta, initial uint64, exp uint32, want memd.StatusCode) uint64 {
		ext := binary.BigEndian.AppendUint64(nil, delta)
		ext = binary.BigEndian.AppendUint64(ext, initial)
		ext = binary.BigEndian.AppendUint32(ext, exp)
		r := c.expect(&memd.Packet{Command: cmd, Key: []byte(key), Extras: ext}, want)
		if want != memd.StatusSuccess {
			return 0
		}
		return binary.BigEndian.Uint64(r.Value)
	}
	if v := ctr(memd.CmdIncrement, "k", 5, 0, 0, memd.StatusSuccess); v != 7 {
		t.Fatalf("incr: %d", v)
	}
	if v := ctr(memd.CmdDecrement, "k", 50, 0, 0, memd.StatusSuccess); v != 0 {
		t.Fatalf("decr below 0: %d", v)
	}
	if v := ctr(memd.CmdIncrement, "new", 1, 42, 0, memd.StatusSuccess); v != 42 {
		t.Fatalf("incr creating: %d", v)
	}
	ctr(memd.CmdIncrement, "absent", 1, 42, 0xffffffff, memd.StatusKeyNotFound)
	c.set(memd.CmdSet, "text", "abc", 0, 0, 0, memd.StatusSuccess)
	ctr(memd.CmdIncrement, "text", 1, 0, 0, memd.StatusBadDelta)

	// APPEND and PREPEND keep flags and expiry; GET_META tells them.
	c.set(memd.CmdSet, "cat", "b", 3, 500, 0, memd.StatusSuccess)
	c.expect(&memd.Packet{Command: memd.CmdAppend, Key: []byte("cat"), Value: []byte("c")}, memd.StatusSuccess)
	c.expect(&memd.Packet{Command: memd.CmdPrepend, Key: []byte("cat"), Value: []byte("a")}, memd.StatusSuccess)
	c.expect(&memd.Packet{Command: memd.CmdAppend, Key: []byte("cat"), Value: []byte("x"), Cas: 1}, memd.StatusKeyExists)
	c.expect(&memd.Packet{Command: memd.CmdAppend, Key: []byte("nocat"), Value: []byte("x")}, memd.StatusKeyNotFound)
	r = c.expect(&memd.Packet{Command: memd.CmdGet, Key: []byte("cat")}, memd.StatusSuccess)
	if string(r.Value) != "abc" {
		t.Fatalf("after append and prepend: %q", r.Value)
	}
	r = c.expect(&memd.Packet{Command: memd.CmdGetMeta, Key: []byte("cat"), Extras: []byte{2}}, memd.StatusSuccess)
	if len(r.Extras) != 21 || binary.BigEndian.Uint32(r.Extras[4:]) != 3 || int64(binary.BigEndian.Uint32(r.Extras[8:])) != f.clock.Now()+500 {
		t.Fatalf("GET_META extras %x", r.Extras)
	}
	c.expect(&memd.Packet{Command: memd.CmdGetMeta, Key: []byte("nocat"), Extras: []byte{2}}, memd.StatusKeyNotFound)
	// A deleted document answers with its tombstone's metadata, as
	// Couchbase's does: the deleted flag, its CAS and revision, and when
	// it was deleted in the expiry field.
	del := c.expect(&memd.Packet{Command: memd.CmdDelete, Key: []byte("cat")}, memd.StatusSuccess)
	r = c.expect(&memd.Packet{Command: memd.CmdGetMeta, Key: []byte("cat")}, memd.StatusSuccess)
	if len(r.Extras) != 20 || binary.BigEndian.Uint32(r.Extras) != 1 || r.Cas != del.Cas ||
		int64(binary.BigEndian.Uint32(r.Extras[8:])) != f.clock.Now() || binary.BigEndian.Uint64(r.Extras[12:]) < 2 {
		t.Fatalf("GET_META of a deleted document: extras %x, CAS %d (the delete's %d)", r.Extras, r.Cas, del.Cas)
	}

	// GETK carries the key; GETQ is silent on a miss.
	r = c.expect(&memd.Packet{Command: memd.CmdCode(0x0c), Key: []byte("text")}, memd.StatusSuccess)
	if string(r.Key) != "text" {
		t.Fatalf("GETK key %q", r.Key)
	}
	c.send(&memd.Packet{Command: memd.CmdCode(0x09), Key: []byte("missing")})
	op := c.send(&memd.Packet{Command: memd.CmdNoop})
	if r := c.read(); r.Command != memd.CmdNoop || r.Opaque != op {
		t.Fatalf("after a GETQ miss: %v, want the NOOP's answer", r.Command)
	}

	// Expiry follows the engine clock.
	c.set(memd.CmdSet, "short", "v", 0, 10, 0, memd.StatusSuccess)
	f.clock.Advance(11)
	c.expect(&memd.Packet{Command: memd.CmdGet, Key: []byte("short")}, memd.StatusKeyNotFound)

	// Delete, with a CAS check.
	c.expect(&memd.Packet{Command: memd.CmdDelete, Key: []byte("text"), Cas: 1}, memd.StatusKeyExists)
	c.expect(&memd.Packet{Command: memd.CmdDelete, Key: []byte("text")}, memd.StatusSuccess)
	c.expect(&memd.Packet{Command: memd.CmdDelete, Key: []byte("text")}, memd.StatusKeyNotFound)
	c.expect(&memd.Packet{Command: memd.CmdGet, Key: []byte("text")}, memd.StatusKeyNotFound)

	// Bad extras are EINVAL, and the connection goes on.
	c.expect(&memd.Packet{Command: memd.CmdSet, Key: []byte("k"), Value: []byte("v")}, memd.StatusInvalidArgs)
	c.expect(&memd.Packet{Command: memd.CmdNoop}, memd.StatusSuccess)
}

func TestPermissions(t *testing.T) {
	f := newFixture(t)
	admin := f.dial(t)
	admin.login(adminUser, adminPass)
	admin.set(memd.CmdSet, "k", "v", 0, 0, 0, memd.StatusSuccess)

	c := f.dial(t)
	c.hello(memd.FeatureXerror)
	c.login(readerUser, readerPass)
	c.expect(&memd.Packet{Command: memd.CmdGet, Key: []byte("k")}, memd.StatusSuccess)
	c.set(memd.CmdSet, "k", "w", 0, 0, 0, memd.StatusAccessError)
	c.expect(&memd.Packet{Command: memd.CmdDelete, Key: []byte("k")}, memd.StatusAccessError)
	c.expect(&memd.Packet{Command: memd.CmdGAT, Key: []byte("k"), Extras: make([]byte, 4)}, memd.StatusAccessError)
	if d, err := f.bucket.DefaultCollection().Get(context.Background(), "k"); err != nil || string(d.Value) != "v" {
		t.Fatalf("after refused writes: %+v, %v", d, err)
	}
	// A bucket the user has no role on cannot be selected.
	if _, err := f.eng.CreateBucket(context.Background(), engine.DefaultBucketSettings("other")); err != nil {
		t.Fatal(err)
	}
	c.expect(&memd.Packet{Command: memd.CmdSelectBucket, Key: []byte("other")}, memd.StatusAccessError)
}

func TestCollections(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if err := f.bucket.CreateScope(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	ci, err := f.bucket.CreateCollection(ctx, "s", "c", 30)
	if err != nil {
		t.Fatal(err)
	}
	c := f.dial(t)
	c.hello(memd.FeatureXerror, memd.FeatureCollections)
	c.login(adminUser, adminPass)

	r := c.expect(&memd.Packet{Command: memd.CmdCollectionsGetID, Value: []byte("s.c")}, memd.StatusSuccess)
	if len(r.Extras) != 12 || binary.BigEndian.Uint64(r.Extras) != f.bucket.ManifestUID() || binary.BigEndian.Uint32(r.Extras[8:]) != uint32(ci.ID) {
		t.Fatalf("GET_COLLECTION_ID extras %x", r.Extras)
	}
	c.expect(&memd.Packet{Command: memd.CmdCollectionsGetID, Value: []byte("s.nope")}, memd.StatusCollectionUnknown)
	c.expect(&memd.Packet{Command: memd.CmdCollectionsGetID, Value: []byte("nope.c")}, memd.StatusScopeUnknown)

	// A write to the collection gets the collection's maxTTL.
	ext := make([]byte, 8)
	c.expect(&memd.Packet{Command: memd.CmdSet, CollectionID: uint32(ci.ID), Key: []byte("k"), Value: []byte("v"), Extras: ext}, memd.StatusSuccess)
	coll, err := f.bucket.Collection("s", "c")
	if err != nil {
		t.Fatal(err)
	}
	d, err := coll.Get(ctx, "k")
	if err != nil || d.Expiration != f.clock.Now()+30 {
		t.Fatalf("collection write: %+v, %v", d, err)
	}
	c.expect(&memd.Packet{Command: memd.CmdGet, CollectionID: uint32(ci.ID), Key: []byte("k")}, memd.StatusSuccess)
	c.expect(&memd.Packet{Command: memd.CmdGet, Key: []byte("k")}, memd.StatusKeyNotFound) // not in _default
	c.expect(&memd.Packet{Command: memd.CmdGet, CollectionID: 999, Key: []byte("k")}, memd.StatusCollectionUnknown)

	r = c.expect(&memd.Packet{Command: memd.CmdCollectionsGetManifest}, memd.StatusSuccess)
	if !strings.Contains(string(r.Value), `"name":"c"`) || !strings.Contains(string(r.Value), `"maxTTL":30`) {
		t.Fatalf("manifest %s", r.Value)
	}
}

// lookupSpec encodes one multi-lookup path.
func lookupSpec(op memd.SubDocOpType, xattr bool, path string) []byte {
	flags := byte(0)
	if xattr {
		flags = byte(memd.SubdocFlagXattrPath)
	}
	b := []byte{byte(op), flags}
	b = binary.BigEndian.AppendUint16(b, uint16(len(path)))
	return append(b, path...)
}

// lookupResults splits a multi-lookup answer.
func lookupResults(t *testing.T, v []byte) (sts []memd.StatusCode, vals []string) {
	t.Helper()
	for len(v) > 0 {
		if len(v) < 6 {
			t.Fatalf("short lookup answer %x", v)
		}
		n := int(binary.BigEndian.Uint32(v[2:]))
		sts = append(sts, memd.StatusCode(binary.BigEndian.Uint16(v)))
		vals = append(vals, string(v[6:6+n]))
		v = v[6+n:]
	}
	return
}

func TestLookupIn(t *testing.T) {
	f := newFixture(t)
	c := f.dial(t)
	c.hello(memd.FeatureXerror, memd.FeatureJSON, memd.FeatureXattr)
	c.login(adminUser, adminPass)
	cas := c.set(memd.CmdSet, "h", `{"name":"Ritz","a.b":1,"rooms":[{"n":101},{"n":102}]}`, 7, 100, 0, memd.StatusSuccess)

	var body []byte
	for _, s := range [][]byte{
		lookupSpec(memd.SubDocOpGet, true, "$document.exptime"),
		lookupSpec(memd.SubDocOpGet, true, "$document.CAS"),
		lookupSpec(memd.SubDocOpGet, true, "$document.flags"),
		lookupSpec(memd.SubDocOpGet, false, "rooms[-1].n"),
		lookupSpec(memd.SubDocOpGet, false, "`a.b`"),
		lookupSpec(memd.SubDocOpExists, false, "nope"),
		lookupSpec(memd.SubDocOpGetCount, false, "rooms"),
		lookupSpec(memd.SubDocOpGet, false, "name[0]"),
		lookupSpec(memd.SubDocOpGet, true, "$nope"),
		lookupSpec(memd.SubDocOpGetDoc, false, ""),
	} {
		body = append(body, s...)
	}
	r := c.do(&memd.Packet{Command: memd.CmdSubDocMultiLookup, Key: []byte("h"), Value: body})
	if r.Status != memd.StatusSubDocBadMulti || r.Cas != cas {
		t.Fatalf("status %v cas %d", r.Status, r.Cas)
	}
	sts, vals := lookupResults(t, r.Value)
	wantSts := []memd.StatusCode{0, 0, 0, 0, 0, memd.StatusSubDocPathNotFound, 0, memd.StatusSubDocPathMismatch, memd.StatusSubDocXattrUnknownVAttr, 0}
	if !slices.Equal(sts, wantSts) {
		t.Fatalf("statuses %v, want %v", sts, wantSts)
	}
	exp := f.clock.Now() + 100
	if vals[0] != strconvI(exp) || vals[2] != "7" || vals[3] != "102" || vals[4] != "1" || vals[6] != "2" || !strings.HasPrefix(vals[9], `{"name"`) {
		t.Fatalf("values %q", vals)
	}
	if vals[1] != `"0x`+hex16(cas)+`"` {
		t.Fatalf("$document.CAS %s, want 0x%s", vals[1], hex16(cas))
	}
	c.expect(&memd.Packet{Command: memd.CmdSubDocMultiLookup, Key: []byte("missing"), Value: body}, memd.StatusKeyNotFound)
	c.expect(&memd.Packet{Command: memd.CmdSubDocMultiLookup, Key: []byte("h"), Value: []byte{1, 2}}, memd.StatusInvalidArgs)
}

// Pipelined commands run concurrently but are answered in request order,
// and commands on one document run in order: a GET sent right after a SET
// sees it.
func TestPipelinedOrder(t *testing.T) {
	f := newFixture(t)
	c := f.dial(t)
	c.login(adminUser, adminPass)
	const n = 300
	var ops []uint32
	for i := range n {
		key := []byte("k" + strconvI(int64(i%20)))
		ext := make([]byte, 8)
		ops = append(ops, c.send(&memd.Packet{Command: memd.CmdSet, Key: key, Value: []byte(strconvI(int64(i))), Extras: ext}))
		ops = append(ops, c.send(&memd.Packet{Command: memd.CmdGet, Key: key}))
	}
	for i, op := range ops {
		r := c.read()
		if r.Opaque != op || r.Status != memd.StatusSuccess {
			t.Fatalf("answer %d: opaque %d status %v, want opaque %d", i, r.Opaque, r.Status, op)
		}
		if r.Command == memd.CmdGet && string(r.Value) != strconvI(int64(i/2)) {
			t.Fatalf("GET after SET %d read %q", i/2, r.Value)
		}
	}
}
