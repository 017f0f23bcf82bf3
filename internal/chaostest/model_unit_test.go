package chaostest

import (
	"fmt"
	"slices"
	"testing"

	"github.com/anishathalye/porcupine"
)

// op builds an operation of client c on key k called at call and returned
// at ret.
func op(c int, in input, out output, call, ret int64) porcupine.Operation {
	return porcupine.Operation{ClientId: c, Input: in, Output: out, Call: call, Return: ret}
}

// The register model accepts what a linearizable store may answer and
// rejects a stale read, a CAS that succeeds against a version overwritten
// before it was sent, and a delete of a missing key acknowledged; a write
// of unknown outcome may or may not have been applied.
func TestRegisterModel(t *testing.T) {
	set := func(v string) input { return input{kind: opSet, key: "k", value: v} }
	get := input{kind: opGet, key: "k"}
	ok := output{kind: outOK}
	read := func(v string) output { return output{kind: outOK, value: v} }
	missing := output{kind: outNotFound}
	unknown := output{kind: outUnknown}
	const never = 1 << 40
	cases := []struct {
		name  string
		ops   []porcupine.Operation
		legal bool
	}{
		{"read after write", []porcupine.Operation{op(0, set("a"), ok, 0, 10), op(1, get, read("a"), 20, 30)}, true},
		{"stale read", []porcupine.Operation{op(0, set("a"), ok, 0, 10), op(0, set("b"), ok, 11, 15), op(1, get, read("a"), 20, 30)}, false},
		{"concurrent read sees either", []porcupine.Operation{op(0, set("a"), ok, 0, 10), op(0, set("b"), ok, 11, 25), op(1, get, read("a"), 20, 30)}, true},
		{"lost write reads missing", []porcupine.Operation{op(0, set("a"), ok, 0, 10), op(1, get, missing, 20, 30)}, false},
		{"unknown write applied", []porcupine.Operation{op(0, set("a"), unknown, 0, never), op(1, get, read("a"), 20, 30)}, true},
		{"unknown write not applied", []porcupine.Operation{op(0, set("a"), unknown, 0, never), op(1, get, missing, 20, 30)}, true},
		{"cas on the version read", []porcupine.Operation{op(0, set("a"), ok, 0, 10), op(1, input{kind: opCAS, key: "k", value: "b", expect: "a"}, ok, 20, 30), op(1, get, read("b"), 40, 50)}, true},
		{"cas on an overwritten version", []porcupine.Operation{op(0, set("a"), ok, 0, 10), op(0, set("c"), ok, 12, 15), op(1, input{kind: opCAS, key: "k", value: "b", expect: "a"}, ok, 20, 30)}, false},
		{"cas mismatch on the current version", []porcupine.Operation{op(0, set("a"), ok, 0, 10), op(1, input{kind: opCAS, key: "k", value: "b", expect: "a"}, output{kind: outMismatch}, 20, 30)}, false},
		{"delete then missing", []porcupine.Operation{op(0, set("a"), ok, 0, 10), op(1, input{kind: opDelete, key: "k"}, ok, 20, 30), op(1, get, missing, 40, 50)}, true},
		{"delete of a missing key acknowledged", []porcupine.Operation{op(1, input{kind: opDelete, key: "k"}, ok, 20, 30)}, false},
		{"keys apart", []porcupine.Operation{op(0, set("a"), ok, 0, 10), op(1, input{kind: opGet, key: "j"}, missing, 20, 30)}, true},
	}
	model := registerModel.ToModel()
	for _, c := range cases {
		if got := porcupine.CheckOperations(model, c.ops); got != c.legal {
			t.Errorf("%s: linearizable %v, want %v", c.name, got, c.legal)
		}
	}
}

// lostWrites names a key whose last acknowledged write is not what it
// holds, unless a later or concurrent write (acknowledged or unknown)
// explains it.
func TestLostWrites(t *testing.T) {
	set := func(v string) input { return input{kind: opSet, key: "k", value: v} }
	ok, unknown := output{kind: outOK}, output{kind: outUnknown}
	hist := []porcupine.Operation{op(0, set("a"), ok, 0, 10), op(0, set("b"), ok, 20, 30)}
	if lost := lostWrites(hist, map[string]string{"k": "b"}); len(lost) != 0 {
		t.Errorf("the last write held: %v", lost)
	}
	if lost := lostWrites(hist, map[string]string{"k": "a"}); len(lost) != 1 {
		t.Errorf("an overwritten value held: %v", lost)
	}
	if lost := lostWrites(hist, map[string]string{}); len(lost) != 1 {
		t.Errorf("the key missing: %v", lost)
	}
	hist = append(hist, op(1, set("c"), unknown, 25, 1<<40), op(1, input{kind: opDelete, key: "k"}, ok, 40, 50))
	if lost := lostWrites(hist, map[string]string{"k": "b"}); len(lost) != 1 {
		t.Errorf("a value written before the last acknowledged delete held: %v", lost)
	}
	if lost := lostWrites(hist, map[string]string{"k": "c"}); len(lost) != 0 {
		t.Errorf("a write of unknown outcome, applied late, held: %v", lost)
	}
	if lost := lostWrites(hist, map[string]string{}); len(lost) != 0 {
		t.Errorf("the delete held: %v", lost)
	}
}

// The writes of unknown outcome whose value nothing read leave the first
// check (unseenUnknownWrites); those a get or a CAS saw, and deletes, stay.
// Without them a history may be illegal that is legal with them (one
// explained a CAS mismatch), which is why only an Ok verdict of the first
// check is taken and anything else is decided on the whole history.
func TestUnseenUnknownWrites(t *testing.T) {
	set := func(v string) input { return input{kind: opSet, key: "k", value: v} }
	cas := func(v, expect string) input { return input{kind: opCAS, key: "k", value: v, expect: expect} }
	get := input{kind: opGet, key: "k"}
	ok, unknown := output{kind: outOK}, output{kind: outUnknown}
	read := func(v string) output { return output{kind: outOK, value: v} }
	const never = 1 << 40
	hist := []porcupine.Operation{
		op(0, set("a"), ok, 0, 10),
		op(1, set("x"), unknown, 12, never),                        // never read: leaves
		op(2, set("y"), unknown, 14, never),                        // read below: stays
		op(3, cas("z", "a"), unknown, 16, never),                   // never read: leaves
		op(4, input{kind: opDelete, key: "k"}, unknown, 18, never), // a delete: stays
		op(0, get, read("y"), 20, 30),
	}
	kept := unseenUnknownWrites(hist)
	var got []string
	for _, o := range kept {
		in := o.Input.(input)
		got = append(got, fmt.Sprint(in.kind, in.value))
	}
	if want := []string{fmt.Sprint(opSet, "a"), fmt.Sprint(opSet, "y"), fmt.Sprint(opDelete, ""), fmt.Sprint(opGet, "")}; !slices.Equal(got, want) {
		t.Fatalf("kept %v, want %v", got, want)
	}
	model := registerModel.ToModel()
	if !porcupine.CheckOperations(model, kept) || !porcupine.CheckOperations(model, hist) {
		t.Fatal("the history, with or without the unread writes, should be linearizable")
	}

	explained := []porcupine.Operation{
		op(0, set("a"), ok, 0, 10),
		op(1, set("x"), unknown, 12, never),
		op(2, cas("b", "a"), output{kind: outMismatch}, 20, 30), // only x explains it
	}
	if !porcupine.CheckOperations(model, explained) {
		t.Fatal("a CAS mismatch after a write of unknown outcome should be linearizable")
	}
	if porcupine.CheckOperations(model, unseenUnknownWrites(explained)) {
		t.Fatal("without the unread write the mismatch has no explanation: the first check must not be taken as the verdict")
	}
}
