package kv_test

import (
	"testing"

	"github.com/couchbase/gocbcore/v10/memd"
)

// Framing extras Mayfly does not act on are refused, as Couchbase refuses
// what it cannot do, instead of being dropped, the request then running as
// if they were not there: a user impersonation frame (the request would
// run with the authenticated user's rights, not the impersonated one's) is
// NOT_SUPPORTED; a frame id no Couchbase defines is UNKNOWN_FRAME_INFO
// (0x80), a barrier with a value EINVAL. Nothing is written and the
// connection goes on. The error map lists the statuses the durability and
// frame checks answer.
func TestFramesNotActedOn(t *testing.T) {
	f := newFixture(t)
	c := f.dial(t)
	c.hello(memd.FeatureAltRequests, memd.FeatureSyncReplication, memd.FeatureXerror)
	c.mc.EnableFeature(memd.FeatureAltRequests)
	c.login(adminUser, adminPass)
	for _, tc := range []struct {
		name   string
		frames []byte
		want   memd.StatusCode
	}{
		{"impersonation", append([]byte{4<<4 | 6}, "reader"...), memd.StatusNotSupported},
		{"impersonation with an extra privilege", append([]byte{6<<4 | 9}, "Stats.Read"[:9]...), memd.StatusNotSupported},
		{"unknown id 7", []byte{7<<4 | 1, 0}, memd.StatusCode(0x80)},
		{"unknown escaped id 40", []byte{0xf0 | 1, 40 - 15, 0}, memd.StatusCode(0x80)},
		{"barrier with a value", []byte{0<<4 | 1, 0}, memd.StatusInvalidArgs},
	} {
		op := c.rawSet(tc.frames, "k", "1")
		if r := c.read(); r.Opaque != op || r.Status != tc.want {
			t.Errorf("SET with %s frame: status %v (%s), want %v", tc.name, r.Status, r.Value, tc.want)
		}
	}
	c.expect(&memd.Packet{Command: memd.CmdGet, Key: []byte("k")}, memd.StatusKeyNotFound)
	// The frames an SDK sends and Mayfly may ignore are taken.
	op := c.rawSet([]byte{0 << 4, 3<<4 | 2, 'a', 'b'}, "k", "1") // barrier, tracing context
	if r := c.read(); r.Opaque != op || r.Status != memd.StatusSuccess {
		t.Errorf("SET with barrier and tracing frames: status %v (%s)", r.Status, r.Value)
	}

	r := c.expect(&memd.Packet{Command: memd.CmdGetErrorMap, Value: []byte{0, 2}}, memd.StatusSuccess)
	errs, _ := jsonOf(t, r.Value)["errors"].(map[string]any)
	for _, code := range []string{"80", "a0"} {
		if errs[code] == nil {
			t.Errorf("the error map has no entry for status 0x%s", code)
		}
	}
}
