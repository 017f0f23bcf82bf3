package changes

import (
	"encoding/json"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// TestAppendCouchDoc: every kind of value comes out as CouchDB shows a
// document, valid JSON whose _id and _rev are the document's own, even when
// the body holds others.
func TestAppendCouchDoc(t *testing.T) {
	for _, tc := range []struct {
		value string
		typ   engine.DocType
		want  map[string]any
	}{
		{`{"a":1,"b":[2]}`, engine.TypeJSON, map[string]any{"a": 1.0, "b": []any{2.0}}},
		{` {}`, engine.TypeJSON, map[string]any{}},
		{`{"_id":"other","a":1,"_rev":"9-x"}`, engine.TypeJSON, map[string]any{"a": 1.0}},
		{`{"_id":"other"}`, engine.TypeJSON, map[string]any{}},
		{`[1,2]`, engine.TypeJSON, map[string]any{"json": []any{1.0, 2.0}}},
		{"\x00\x01", engine.TypeBinary, map[string]any{"base64": "AAE="}},
	} {
		d := &engine.Document{Key: "k", Value: []byte(tc.value), Type: tc.typ, CAS: 7, RevSeq: 3}
		out := AppendCouchDoc(nil, d)
		var got map[string]any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%q: %s is not JSON: %v", tc.value, out, err)
		}
		if got["_id"] != "k" || got["_rev"] != d.Rev() {
			t.Errorf("%q: _id %v, _rev %v; want k, %s", tc.value, got["_id"], got["_rev"], d.Rev())
		}
		delete(got, "_id")
		delete(got, "_rev")
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(tc.want)
		if string(gj) != string(wj) {
			t.Errorf("%q: members %s, want %s", tc.value, gj, wj)
		}
	}
}
