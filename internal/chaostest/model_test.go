package chaostest

import (
	"fmt"
	"hash/fnv"
	"sort"

	"github.com/anishathalye/porcupine"
)

// opKind is what a client asked.
type opKind int

const (
	opGet opKind = iota
	opSet        // upsert, or a write with a (long) expiry
	opCAS        // replace carrying the CAS of the version last read
	opDelete
)

// outKind is what the answer said.
type outKind int

const (
	outOK outKind = iota
	outNotFound
	outMismatch // CAS mismatch
	outUnknown  // a timeout, a 5xx, a broken connection: maybe applied
)

// input is one operation on one key. Every write writes a value no other
// write writes, so a version is known by its value: a CAS replace carries
// the value it read (expect) along with that version's CAS.
type input struct {
	kind   opKind
	key    string
	value  string // opSet, opCAS: the value written
	expect string // opCAS: the value read with the CAS sent
	cas    uint64 // opCAS: the CAS sent
	via    string // the node and door, for the visualisation
}

// output is the answer; value is what a get read.
type output struct {
	kind  outKind
	value string
	why   string // outUnknown: why, for the tally
	// routedTo, for an HTTP write, is the node its answer says carried it
	// out when another node than the one asked did (X-Mayfly-Routed-To).
	routedTo string
}

// registerModel is one key as a register holding a value, "" for a
// missing key (no write writes ""). An operation whose outcome is unknown
// may or may not have been applied: both states follow.
var registerModel = porcupine.NondeterministicModel{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(input).key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		sort.Strings(keys)
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() []any { return []any{""} },
	Step: func(state, in, out any) []any {
		s, i, o := state.(string), in.(input), out.(output)
		switch i.kind {
		case opGet:
			switch {
			case o.kind == outOK && o.value == s, o.kind == outNotFound && s == "":
				return []any{s}
			}
			return nil
		case opSet:
			if o.kind == outUnknown {
				return []any{s, i.value}
			}
			return []any{i.value}
		case opCAS:
			switch o.kind {
			case outOK:
				if s == i.expect {
					return []any{i.value}
				}
			case outNotFound:
				if s == "" {
					return []any{s}
				}
			case outMismatch:
				if s != i.expect {
					return []any{s}
				}
			case outUnknown:
				if s == i.expect {
					return []any{s, i.value}
				}
				return []any{s}
			}
			return nil
		case opDelete:
			switch o.kind {
			case outOK:
				if s != "" {
					return []any{""}
				}
			case outNotFound:
				if s == "" {
					return []any{s}
				}
			case outUnknown:
				return []any{s, ""}
			}
			return nil
		}
		return nil
	},
	Equal: func(a, b any) bool { return a.(string) == b.(string) },
	Hash: func(state any) uint64 {
		h := fnv.New64a()
		h.Write([]byte(state.(string)))
		return h.Sum64()
	},
	DescribeOperation: func(in, out any) string {
		i, o := in.(input), out.(output)
		var res string
		switch o.kind {
		case outOK:
			res = "ok"
			if i.kind == opGet {
				res = o.value
			}
		case outNotFound:
			res = "not found"
		case outMismatch:
			res = "cas mismatch"
		case outUnknown:
			res = "unknown"
		}
		switch i.kind {
		case opGet:
			return fmt.Sprintf("get %s via %s → %s", i.key, i.via, res)
		case opSet:
			return fmt.Sprintf("set %s %s via %s → %s", i.key, i.value, i.via, res)
		case opCAS:
			return fmt.Sprintf("cas %s %s→%s via %s → %s", i.key, i.expect, i.value, i.via, res)
		default:
			return fmt.Sprintf("delete %s via %s → %s", i.key, i.via, res)
		}
	},
	DescribeState: func(state any) string {
		if state.(string) == "" {
			return "(missing)"
		}
		return state.(string)
	},
}

// lostWrites checks the value every node reads for each key at the end
// (final, "" for missing) against the history: the last acknowledged write
// of a key (by return time) must be what it holds, unless a later or
// concurrent write (acknowledged, or of unknown outcome) wrote it. It
// returns one line per key that lost its acknowledged write.
func lostWrites(history []porcupine.Operation, final map[string]string) []string {
	var lost []string
	byKey := map[string][]porcupine.Operation{}
	for _, op := range history {
		i, o := op.Input.(input), op.Output.(output)
		if i.kind == opGet || o.kind != outOK && o.kind != outUnknown {
			continue // reads and writes refused change nothing
		}
		byKey[i.key] = append(byKey[i.key], op)
	}
	result := func(i input) string {
		if i.kind == opDelete {
			return ""
		}
		return i.value
	}
	for k, ops := range byKey {
		var last *porcupine.Operation
		for j := range ops {
			if ops[j].Output.(output).kind == outOK && (last == nil || ops[j].Return > last.Return) {
				last = &ops[j]
			}
		}
		if last == nil {
			continue
		}
		ok := final[k] == result(last.Input.(input))
		for _, op := range ops {
			if !ok && op.Return > last.Call && final[k] == result(op.Input.(input)) {
				ok = true
			}
		}
		if !ok {
			lost = append(lost, fmt.Sprintf("%s holds %q, acknowledged last: %s", k, final[k],
				registerModel.DescribeOperation(last.Input, last.Output)))
		}
	}
	sort.Strings(lost)
	return lost
}
