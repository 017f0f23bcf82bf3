package kv

import (
	"testing"

	"github.com/couchbase/gocbcore/v10/memd"
	"github.com/tidwall/gjson"
)

// Path mutations change only the bytes of the paths they name.
func TestMutateOne(t *testing.T) {
	doc := `{"name": "Ritz", "rooms": [{"n": 101}, {"n": 102}], "tags": [], "meta": {"a": 1}}`
	for _, tc := range []struct {
		op    memd.SubDocOpType
		flags memd.SubdocFlag
		path  string
		value string
		want  string
		st    memd.StatusCode
	}{
		{memd.SubDocOpDictSet, 0, "name", `"Savoy"`, `{"name": "Savoy", "rooms": [{"n": 101}, {"n": 102}], "tags": [], "meta": {"a": 1}}`, 0},
		{memd.SubDocOpDictSet, 0, "stars", `5`, `{"name": "Ritz", "rooms": [{"n": 101}, {"n": 102}], "tags": [], "meta": {"a": 1},"stars":5}`, 0},
		{memd.SubDocOpDictAdd, 0, "name", `"x"`, "", memd.StatusSubDocPathExists},
		{memd.SubDocOpReplace, 0, "rooms[1].n", `202`, `{"name": "Ritz", "rooms": [{"n": 101}, {"n": 202}], "tags": [], "meta": {"a": 1}}`, 0},
		{memd.SubDocOpReplace, 0, "rooms[-1].n", `7`, `{"name": "Ritz", "rooms": [{"n": 101}, {"n": 7}], "tags": [], "meta": {"a": 1}}`, 0},
		{memd.SubDocOpReplace, 0, "nope", `1`, "", memd.StatusSubDocPathNotFound},
		{memd.SubDocOpDelete, 0, "name", ``, `{"rooms": [{"n": 101}, {"n": 102}], "tags": [], "meta": {"a": 1}}`, 0},
		{memd.SubDocOpDelete, 0, "meta", ``, `{"name": "Ritz", "rooms": [{"n": 101}, {"n": 102}], "tags": []}`, 0},
		{memd.SubDocOpDelete, 0, "rooms[0]", ``, `{"name": "Ritz", "rooms": [{"n": 102}], "tags": [], "meta": {"a": 1}}`, 0},
		{memd.SubDocOpArrayPushLast, 0, "tags", `"a"`, `{"name": "Ritz", "rooms": [{"n": 101}, {"n": 102}], "tags": ["a"], "meta": {"a": 1}}`, 0},
		{memd.SubDocOpArrayPushFirst, 0, "rooms", `1`, `{"name": "Ritz", "rooms": [1,{"n": 101}, {"n": 102}], "tags": [], "meta": {"a": 1}}`, 0},
		{memd.SubDocOpArrayPushLast, 0, "name", `1`, "", memd.StatusSubDocPathMismatch},
		{memd.SubDocOpCounter, 0, "meta.a", `5`, `{"name": "Ritz", "rooms": [{"n": 101}, {"n": 102}], "tags": [], "meta": {"a": 6}}`, 0},
		{memd.SubDocOpCounter, 0, "name", `5`, "", memd.StatusSubDocPathMismatch},
		{memd.SubDocOpDictSet, memd.SubdocFlagMkDirP, "x.y.z", `true`, `{"name": "Ritz", "rooms": [{"n": 101}, {"n": 102}], "tags": [], "meta": {"a": 1},"x":{"y":{"z":true}}}`, 0},
		{memd.SubDocOpDictSet, memd.SubdocFlagMkDirP, "meta.b.c", `2`, `{"name": "Ritz", "rooms": [{"n": 101}, {"n": 102}], "tags": [], "meta": {"a": 1,"b":{"c":2}}}`, 0},
		{memd.SubDocOpDictSet, 0, "x.y", `1`, "", memd.StatusSubDocPathNotFound},
		{memd.SubDocOpDictSet, 0, "name", `not json`, "", memd.StatusSubDocCantInsert},
		{memd.SubDocOpDictSet, 0, "name..", `1`, "", memd.StatusSubDocPathInvalid},
		{memd.SubDocOpArrayInsert, 0, "rooms[1]", `"x","y"`, `{"name": "Ritz", "rooms": [{"n": 101}, "x","y",{"n": 102}], "tags": [], "meta": {"a": 1}}`, 0},
		{memd.SubDocOpArrayInsert, 0, "rooms[2]", `3`, `{"name": "Ritz", "rooms": [{"n": 101}, {"n": 102},3], "tags": [], "meta": {"a": 1}}`, 0},
		{memd.SubDocOpArrayInsert, 0, "tags[0]", `3`, `{"name": "Ritz", "rooms": [{"n": 101}, {"n": 102}], "tags": [3], "meta": {"a": 1}}`, 0},
		{memd.SubDocOpArrayInsert, 0, "rooms[3]", `3`, "", memd.StatusSubDocPathNotFound},
		{memd.SubDocOpArrayInsert, 0, "rooms[-1]", `3`, "", memd.StatusSubDocPathInvalid},
		{memd.SubDocOpArrayInsert, 0, "rooms", `3`, "", memd.StatusSubDocPathInvalid},
		{memd.SubDocOpArrayInsert, 0, "name[0]", `3`, "", memd.StatusSubDocPathMismatch},
		{memd.SubDocOpArrayAddUnique, 0, "tags", `"a"`, `{"name": "Ritz", "rooms": [{"n": 101}, {"n": 102}], "tags": ["a"], "meta": {"a": 1}}`, 0},
		{memd.SubDocOpArrayAddUnique, 0, "rooms", `1`, "", memd.StatusSubDocPathMismatch},
		{memd.SubDocOpArrayAddUnique, 0, "tags", `{}`, "", memd.StatusSubDocCantInsert},
		{memd.SubDocOpArrayAddUnique, memd.SubdocFlagMkDirP, "new.list", `true`, `{"name": "Ritz", "rooms": [{"n": 101}, {"n": 102}], "tags": [], "meta": {"a": 1},"new":{"list":[true]}}`, 0},
		{memd.SubDocOpArrayPushLast, memd.SubdocFlagMkDirP, "meta.l", `1,2`, `{"name": "Ritz", "rooms": [{"n": 101}, {"n": 102}], "tags": [], "meta": {"a": 1,"l":[1,2]}}`, 0},
		{memd.SubDocOpArrayPushLast, 0, "meta.l", `1`, "", memd.StatusSubDocPathNotFound},
	} {
		got, _, st := mutateOne([]byte(doc), mutateSpec{op: tc.op, flags: tc.flags, path: tc.path, value: []byte(tc.value)})
		if st != tc.st || (st == 0 && string(got) != tc.want) {
			t.Errorf("%v %s %s:\n got %s (%v)\nwant %s (%v)", tc.op, tc.path, tc.value, got, st, tc.want, tc.st)
		}
	}
}

// Add unique compares values, not their spelling.
func TestAddUnique(t *testing.T) {
	doc := `{"l": [1, "a\u0062", true, null, 2.50]}`
	for _, v := range []string{`1`, `1.0`, `"ab"`, `true`, `null`, `2.5`} {
		if _, _, st := mutateOne([]byte(doc), mutateSpec{op: memd.SubDocOpArrayAddUnique, path: "l", value: []byte(v)}); st != memd.StatusSubDocPathExists {
			t.Errorf("add unique %s: %v, want PATH_EEXISTS", v, st)
		}
	}
	for _, v := range []string{`3`, `"a"`, `false`, `"1"`} {
		if _, _, st := mutateOne([]byte(doc), mutateSpec{op: memd.SubDocOpArrayAddUnique, path: "l", value: []byte(v)}); st != memd.StatusSuccess {
			t.Errorf("add unique %s: %v, want success", v, st)
		}
	}
}

// FuzzMutateOne: a path mutation of a JSON document never panics, and
// what it makes is JSON.
func FuzzMutateOne(f *testing.F) {
	f.Add(`{"a": [1, {"b": 2}], "c": {}}`, "a[1].b", `3`, byte(memd.SubDocOpDictSet), byte(0))
	f.Add(`{"a": [1, 2]}`, "a[0]", ``, byte(memd.SubDocOpDelete), byte(0))
	f.Add(`{"a": []}`, "a", `1,2`, byte(memd.SubDocOpArrayPushFirst), byte(0))
	f.Add(`{}`, "x.`y.z`[0]", `{}`, byte(memd.SubDocOpDictAdd), byte(memd.SubdocFlagMkDirP))
	f.Add(`{"n": 9}`, "n", `-3`, byte(memd.SubDocOpCounter), byte(0))
	f.Add(`{"a": [1, 2]}`, "a[2]", `3,4`, byte(memd.SubDocOpArrayInsert), byte(0))
	f.Add(`{"a": [1, "x"]}`, "a", `"x"`, byte(memd.SubDocOpArrayAddUnique), byte(0))
	f.Add(`{}`, "a.b", `1`, byte(memd.SubDocOpArrayPushLast), byte(memd.SubdocFlagMkDirP))
	f.Fuzz(func(t *testing.T, doc, path, value string, op, flags byte) {
		if !gjson.Valid(doc) {
			return
		}
		out, _, st := mutateOne([]byte(doc), mutateSpec{op: memd.SubDocOpType(op), flags: memd.SubdocFlag(flags), path: path, value: []byte(value)})
		if st == memd.StatusSuccess && !gjson.ValidBytes(out) {
			t.Fatalf("%q %v %q %q made %q", doc, op, path, value, out)
		}
	})
}
