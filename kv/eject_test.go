package kv_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/couchbase/gocbcore/v10/memd"

	"github.com/mayflydb/mayfly/engine"
)

// TestValueEvictionOnTheKVPort: with a 1 MiB quota a couchbase bucket ejects
// values, and GET, APPEND, a multi-path lookup and a multi-path mutation
// read them back from disk intact.
func TestValueEvictionOnTheKVPort(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	if _, _, err := f.bucket.UpdateSettings(ctx, func(s *engine.BucketSettings) error { s.RAMQuotaMB = 1; return nil }); err != nil {
		t.Fatal(err)
	}
	pad := strings.Repeat("x", 4000)
	doc := func(i int) string { return fmt.Sprintf(`{"n":%d,"pad":"%s"}`, i, pad) }
	coll := f.bucket.DefaultCollection()
	const n = 500
	for i := range n {
		if _, err := coll.Upsert(ctx, fmt.Sprint("k", i), []byte(doc(i)), &engine.WriteOptions{Flags: 3}); err != nil {
			t.Fatal(err)
		}
	}
	if st := f.bucket.Stats(); st.NumValueEjects == 0 || st.NonResident == 0 {
		t.Fatalf("after %d writes of 4 KB into 1 MiB: ep_num_value_ejects %d, non-resident %d", n, st.NumValueEjects, st.NonResident)
	}
	c := f.dial(t)
	c.hello(memd.FeatureXerror, memd.FeatureJSON)
	c.login(adminUser, adminPass)
	for i := range n {
		r := c.expect(&memd.Packet{Command: memd.CmdGet, Key: []byte(fmt.Sprint("k", i))}, memd.StatusSuccess)
		if string(r.Value) != doc(i) || binary.BigEndian.Uint32(r.Extras) != 3 {
			t.Fatalf("GET k%d: %.60q flags %x", i, r.Value, r.Extras)
		}
	}

	// Lookups and mutations of documents written first: ejected by now.
	r := c.do(&memd.Packet{Command: memd.CmdSubDocMultiLookup, Key: []byte("k1"), Value: lookupSpec(memd.SubDocOpGet, false, "n")})
	if _, vals := lookupResults(t, r.Value); r.Status != memd.StatusSuccess || len(vals) != 1 || vals[0] != "1" {
		t.Fatalf("lookup k1.n: %v %q", r.Status, vals)
	}
	path, value := "added", "true"
	spec := []byte{byte(memd.SubDocOpDictSet), 0}
	spec = binary.BigEndian.AppendUint16(spec, uint16(len(path)))
	spec = binary.BigEndian.AppendUint32(spec, uint32(len(value)))
	spec = append(append(spec, path...), value...)
	c.expect(&memd.Packet{Command: memd.CmdSubDocMultiMutation, Key: []byte("k2"), Value: spec}, memd.StatusSuccess)
	c.expect(&memd.Packet{Command: memd.CmdAppend, Key: []byte("k3"), Value: []byte(" ")}, memd.StatusSuccess)

	for key, want := range map[string]string{
		"k2": strings.TrimSuffix(doc(2), "}") + `,"added":true}`,
		"k3": doc(3) + " ",
	} {
		d, err := coll.Get(ctx, key)
		if err != nil || string(d.Value) != want {
			t.Errorf("%s after a write built on its ejected value: %.80q…, %v", key, d.Value, err)
		}
	}
	if st := f.bucket.Stats(); st.BgFetched == 0 {
		t.Errorf("ep_bg_fetched 0 after reading ejected values")
	}
}
