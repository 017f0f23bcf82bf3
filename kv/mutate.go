package kv

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/couchbase/gocbcore/v10/memd"
	"github.com/tidwall/gjson"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/internal/jsonstr"
)

// mutateSpec is one path of a multi-mutation.
type mutateSpec struct {
	op    memd.SubDocOpType
	flags memd.SubdocFlag
	path  string
	value []byte
}

// parseMutateSpecs reads a multi-mutation body: per path an opcode, flags,
// a 16-bit path length, a 32-bit value length, the path and the value.
func parseMutateSpecs(b []byte) ([]mutateSpec, error) {
	var specs []mutateSpec
	for len(b) > 0 {
		if len(b) < 8 {
			return nil, errSpecs
		}
		pl, vl := int(binary.BigEndian.Uint16(b[2:])), uint64(binary.BigEndian.Uint32(b[4:]))
		if uint64(len(b)) < 8+uint64(pl)+vl {
			return nil, errSpecs
		}
		specs = append(specs, mutateSpec{op: memd.SubDocOpType(b[0]), flags: memd.SubdocFlag(b[1]), path: string(b[8 : 8+pl]), value: b[8+pl : 8+pl+int(vl)]})
		b = b[8+pl+int(vl):]
		if len(specs) > maxLookupSpecs {
			return nil, fmt.Errorf("%w: more than %d paths", errSpecs, maxLookupSpecs)
		}
	}
	if len(specs) == 0 {
		return nil, fmt.Errorf("%w: no paths", errSpecs)
	}
	return specs, nil
}

// mutateIn runs SUBDOC_MULTI_MUTATION on plain JSON paths: dictionary
// add and upsert, replace, delete, array push first and last, array
// insert, array add-unique, counter, and the whole document (set,
// delete). Extras are an optional expiry, user flags and document flags
// (create the document: MkDoc; only create: AddDoc). The paths apply in
// order, all or none; the document keeps its key order and formatting
// outside the paths changed. Extended attributes are not kept by Mayfly:
// a mutation of one is NOT_SUPPORTED.
func (c *conn) mutateIn(ctx context.Context, pkt *memd.Packet) {
	specs, err := parseMutateSpecs(pkt.Value)
	if err != nil {
		c.fail(pkt, memd.StatusInvalidArgs, err.Error())
		return
	}
	var m mutation
	ext := pkt.Extras
	switch len(ext) {
	case 0, 1, 4, 5, 8, 9:
	default:
		c.fail(pkt, memd.StatusInvalidArgs, "extras must be [expiry [flags]] [document flags]")
		return
	}
	if len(ext)%2 == 1 {
		m.docFlags = memd.SubdocDocFlag(ext[len(ext)-1])
		ext = ext[:len(ext)-1]
	}
	if len(ext) >= 4 {
		m.wo.Expiry = int64(binary.BigEndian.Uint32(ext))
	}
	if len(ext) == 8 {
		m.wo.Flags = binary.BigEndian.Uint32(ext[4:])
		m.flagsGiven = true
	}
	d, results, failed, st, err := c.mutate(ctx, pkt, specs, m)
	switch {
	case err != nil:
		c.failErr(pkt, err)
	case st != memd.StatusSuccess:
		out := append([]byte{byte(failed)}, byte(st>>8), byte(st))
		c.reply(pkt, memd.StatusSubDocBadMulti, nil, nil, out, 0, 0)
	default:
		c.reply(pkt, memd.StatusSuccess, c.mutationExtras(d), nil, results, d.CAS, 0)
	}
}

// mutation is how a sub-document mutation writes: expiry and flags (kept
// from the document unless flagsGiven) and the document flags.
type mutation struct {
	wo         engine.WriteOptions
	docFlags   memd.SubdocDocFlag
	flagsGiven bool
}

// mutate applies specs to the document pkt names, all or none, and writes
// the result, again on the new version should the document change
// meanwhile (unless pkt holds a CAS). It returns the document written and
// the results of the counters; or the index and status of the first path
// that failed, nothing written; or an error for the request as a whole.
func (c *conn) mutate(ctx context.Context, pkt *memd.Packet, specs []mutateSpec, m mutation) (*engine.Document, []byte, int, memd.StatusCode, error) {
	m.wo.PreserveExpiry = pkt.PreserveExpiryFrame != nil
	m.wo.Durability = level(pkt)
	for _, s := range specs {
		if s.flags&memd.SubdocFlagXattrPath != 0 {
			return nil, nil, 0, 0, &statusError{memd.StatusNotSupported, "Mayfly keeps no extended attributes"}
		}
	}
	coll, err := c.collection(pkt)
	if err != nil {
		return nil, nil, 0, 0, err
	}
	key := string(pkt.Key)
	for {
		if err := ctx.Err(); err != nil {
			return nil, nil, 0, 0, err
		}
		old, err := coll.Get(ctx, key)
		missing := errors.Is(err, engine.ErrNotFound)
		switch {
		case err != nil && !missing:
			return nil, nil, 0, 0, err
		case missing && m.docFlags&(memd.SubdocDocFlagMkDoc|memd.SubdocDocFlagAddDoc) == 0:
			return nil, nil, 0, 0, err
		case !missing && m.docFlags&memd.SubdocDocFlagAddDoc != 0:
			return nil, nil, 0, 0, &statusError{memd.StatusKeyExists, "the document exists"}
		case !missing && pkt.Cas != 0 && pkt.Cas != old.CAS && !coll.Locked(old):
			return nil, nil, 0, 0, &statusError{memd.StatusKeyExists, "cas mismatch"}
		}
		doc := []byte("{}")
		w := m.wo
		if !missing {
			doc = old.Value
			if !m.flagsGiven {
				w.Flags = old.Flags
			}
		}
		newDoc, results, failed, st := applyMutations(doc, !missing && old.Type == engine.TypeJSON || missing, specs)
		if st != memd.StatusSuccess {
			return nil, nil, failed, st, nil
		}
		var d *engine.Document
		switch {
		case newDoc == nil:
			w.CAS = rmwCAS(pkt, old)
			d, err = coll.Delete(ctx, key, &w)
		case missing:
			d, err = coll.Insert(ctx, key, newDoc, &w)
		default:
			w.CAS = rmwCAS(pkt, old)
			d, err = coll.Replace(ctx, key, newDoc, &w)
		}
		switch {
		case err == nil:
			return d, results, 0, memd.StatusSuccess, nil
		case pkt.Cas == 0 && (errors.Is(err, engine.ErrCASMismatch) || errors.Is(err, engine.ErrNotFound) || errors.Is(err, engine.ErrKeyExists)):
			continue // changed meanwhile: again on the new version
		default:
			return nil, nil, 0, 0, err
		}
	}
}

// applyMutations applies specs to doc in order. It returns the new
// document (nil: delete it) and the results of the counters; or the index
// and status of the first path that failed.
func applyMutations(doc []byte, isJSON bool, specs []mutateSpec) ([]byte, []byte, int, memd.StatusCode) {
	var results []byte
	doc = bytes.TrimSpace(doc)
	for i, s := range specs {
		switch s.op {
		case memd.SubDocOpSetDoc:
			doc = s.value
			isJSON = jsonstr.Valid(doc)
			continue
		case memd.SubDocOpDeleteDoc:
			doc = nil
			continue
		}
		if !isJSON || doc == nil {
			return nil, nil, i, memd.StatusSubDocNotJSON
		}
		var st memd.StatusCode
		var counter []byte
		doc, counter, st = mutateOne(doc, s)
		if st != memd.StatusSuccess {
			return nil, nil, i, st
		}
		if counter != nil {
			results = append(results, byte(i), 0, 0)
			results = binary.BigEndian.AppendUint32(results, uint32(len(counter)))
			results = append(results, counter...)
		}
	}
	return doc, results, 0, memd.StatusSuccess
}

// located is a path's place in a document: the value there (if any), its
// parent, and the last step.
type located struct {
	parent gjson.Result // the container holding the last step
	value  gjson.Result // the value at the path; !Exists() when missing
	keyPos int          // for an object member: where its key starts
	last   pathSeg
}

// locate finds path in doc. A missing last step is not an error; a missing
// step before it is PATH_ENOENT unless mkdirP, in which case parent is the
// deepest object found and rest the names still to create.
func locate(doc []byte, segs []pathSeg) (located, memd.StatusCode) {
	cur := gjson.ParseBytes(doc)
	cur.Index = 0
	var loc located
	for n, s := range segs {
		var next gjson.Result
		keyPos := -1
		if s.isIdx {
			if !cur.IsArray() {
				return loc, memd.StatusSubDocPathMismatch
			}
			arr := cur.Array()
			i := s.index
			if i < 0 {
				i += len(arr)
			}
			if i >= 0 && i < len(arr) {
				next = arr[i]
			}
		} else {
			if !cur.IsObject() {
				return loc, memd.StatusSubDocPathMismatch
			}
			cur.ForEach(func(k, v gjson.Result) bool {
				if k.String() == s.name {
					next, keyPos = v, k.Index
					return false
				}
				return true
			})
		}
		if n == len(segs)-1 {
			return located{parent: cur, value: next, keyPos: keyPos, last: s}, memd.StatusSuccess
		}
		if !next.Exists() {
			return located{parent: cur, last: s}, memd.StatusSubDocPathNotFound
		}
		cur = next
	}
	return loc, memd.StatusSubDocPathInvalid
}

// splice replaces doc[from:to] with ins.
func splice(doc []byte, from, to int, ins []byte) []byte {
	out := make([]byte, 0, len(doc)-(to-from)+len(ins))
	out = append(out, doc[:from]...)
	out = append(out, ins...)
	return append(out, doc[to:]...)
}

// member is "key":value as JSON.
func member(name string, value []byte) []byte {
	k, _ := json.Marshal(name) // a string always encodes
	return append(append(k, ':'), value...)
}

// insertInto adds an item (a member of an object, an element of an
// array) to container c of doc, first or last.
func insertInto(doc []byte, c gjson.Result, item []byte, first bool) []byte {
	open, end := c.Index, c.Index+len(c.Raw)-1 // the brackets
	empty := len(bytes.TrimSpace([]byte(c.Raw[1:len(c.Raw)-1]))) == 0
	switch {
	case empty:
		return splice(doc, open+1, end, item)
	case first:
		return splice(doc, open+1, open+1, append(item, ','))
	default:
		return splice(doc, end, end, append([]byte{','}, item...))
	}
}

// mutateOne applies one path mutation.
func mutateOne(doc []byte, s mutateSpec) ([]byte, []byte, memd.StatusCode) {
	doc = bytes.TrimSpace(doc) // the root's offsets below count from its first byte
	segs, ok := parsePath(s.path)
	if !ok && !(s.path == "" && (s.op == memd.SubDocOpArrayPushLast || s.op == memd.SubDocOpArrayPushFirst)) {
		return nil, nil, memd.StatusSubDocPathInvalid
	}
	value := s.value
	if s.op != memd.SubDocOpDelete && s.op != memd.SubDocOpCounter && !jsonstr.Valid(value) {
		// Array pushes and inserts may carry several elements separated by
		// commas, but at least one: "[" + nothing + "]" is valid JSON, an
		// element made of nothing is not.
		if !isMultiValue(s.op) || len(bytes.TrimSpace(value)) == 0 || !jsonstr.ValidString("["+string(value)+"]") {
			return nil, nil, memd.StatusSubDocCantInsert
		}
	}
	if s.op == memd.SubDocOpArrayAddUnique {
		if v := gjson.ParseBytes(value); v.IsArray() || v.IsObject() {
			return nil, nil, memd.StatusSubDocCantInsert // only a primitive can be unique
		}
	}
	if len(segs) == 0 { // a push onto the document itself
		root := gjson.ParseBytes(doc)
		root.Index = 0
		if !root.IsArray() {
			return nil, nil, memd.StatusSubDocPathMismatch
		}
		return pushInto(doc, root, value, s.op)
	}
	loc, st := locate(doc, segs)
	if st == memd.StatusSubDocPathNotFound && s.flags&memd.SubdocFlagMkDirP != 0 {
		return mkdirP(doc, segs, s)
	}
	if st != memd.StatusSuccess {
		return nil, nil, st
	}
	v := loc.value
	switch s.op {
	case memd.SubDocOpDictSet, memd.SubDocOpDictAdd:
		if loc.last.isIdx {
			return nil, nil, memd.StatusSubDocPathInvalid
		}
		if v.Exists() {
			if s.op == memd.SubDocOpDictAdd {
				return nil, nil, memd.StatusSubDocPathExists
			}
			return splice(doc, v.Index, v.Index+len(v.Raw), value), nil, memd.StatusSuccess
		}
		return insertInto(doc, loc.parent, member(loc.last.name, value), false), nil, memd.StatusSuccess
	case memd.SubDocOpReplace:
		if !v.Exists() {
			return nil, nil, memd.StatusSubDocPathNotFound
		}
		return splice(doc, v.Index, v.Index+len(v.Raw), value), nil, memd.StatusSuccess
	case memd.SubDocOpDelete:
		if !v.Exists() {
			return nil, nil, memd.StatusSubDocPathNotFound
		}
		return deleteItem(doc, loc), nil, memd.StatusSuccess
	case memd.SubDocOpArrayPushLast, memd.SubDocOpArrayPushFirst, memd.SubDocOpArrayAddUnique:
		if !v.Exists() {
			if s.flags&memd.SubdocFlagMkDirP != 0 && !loc.last.isIdx {
				// mkdir -p makes the array itself too.
				return insertInto(doc, loc.parent, member(loc.last.name, append(append([]byte{'['}, value...), ']')), false), nil, memd.StatusSuccess
			}
			return nil, nil, memd.StatusSubDocPathNotFound
		}
		if !v.IsArray() {
			return nil, nil, memd.StatusSubDocPathMismatch
		}
		return pushInto(doc, v, value, s.op)
	case memd.SubDocOpArrayInsert:
		// The path names the position: an index into an array, at most its
		// length (insert at the end), never from the end.
		if !loc.last.isIdx || loc.last.index < 0 {
			return nil, nil, memd.StatusSubDocPathInvalid
		}
		arr := loc.parent.Array()
		switch {
		case loc.last.index > len(arr):
			return nil, nil, memd.StatusSubDocPathNotFound
		case loc.last.index == len(arr):
			return insertInto(doc, loc.parent, value, false), nil, memd.StatusSuccess
		}
		at := arr[loc.last.index].Index
		return splice(doc, at, at, append(append([]byte(nil), value...), ',')), nil, memd.StatusSuccess
	case memd.SubDocOpCounter:
		delta, err := strconv.ParseInt(string(value), 10, 64)
		if err != nil || delta == 0 {
			return nil, nil, memd.StatusSubDocBadDelta
		}
		if !v.Exists() {
			if loc.last.isIdx {
				return nil, nil, memd.StatusSubDocPathNotFound
			}
			n := []byte(strconv.FormatInt(delta, 10))
			return insertInto(doc, loc.parent, member(loc.last.name, n), false), n, memd.StatusSuccess
		}
		old, err := strconv.ParseInt(v.Raw, 10, 64)
		if err != nil {
			return nil, nil, memd.StatusSubDocPathMismatch
		}
		if (delta > 0 && old > 1<<63-1-delta) || (delta < 0 && old < -1<<63-delta) {
			return nil, nil, memd.StatusSubDocBadRange
		}
		n := []byte(strconv.FormatInt(old+delta, 10))
		return splice(doc, v.Index, v.Index+len(v.Raw), n), n, memd.StatusSuccess
	}
	return nil, nil, memd.StatusSubDocPathInvalid
}

// isMultiValue reports whether op takes several values separated by
// commas.
func isMultiValue(op memd.SubDocOpType) bool {
	return op == memd.SubDocOpArrayPushLast || op == memd.SubDocOpArrayPushFirst || op == memd.SubDocOpArrayInsert
}

// pushInto adds value to the array arr of doc: first, last, or (add
// unique) last unless an equal element is there. Add unique needs an
// array of primitives.
func pushInto(doc []byte, arr gjson.Result, value []byte, op memd.SubDocOpType) ([]byte, []byte, memd.StatusCode) {
	if op == memd.SubDocOpArrayAddUnique {
		want := gjson.ParseBytes(value)
		st := memd.StatusSuccess
		arr.ForEach(func(_, e gjson.Result) bool {
			switch {
			case e.IsArray() || e.IsObject():
				st = memd.StatusSubDocPathMismatch
			case e.Type == want.Type && e.Raw == want.Raw, e.Type == want.Type && e.Type == gjson.String && e.Str == want.Str,
				e.Type == want.Type && e.Type == gjson.Number && e.Num == want.Num:
				st = memd.StatusSubDocPathExists
			default:
				return true
			}
			return false
		})
		if st != memd.StatusSuccess {
			return nil, nil, st
		}
	}
	return insertInto(doc, arr, value, op == memd.SubDocOpArrayPushFirst), nil, memd.StatusSuccess
}

// mkdirP creates the missing objects of a path, then the value (dict
// add, dict upsert or counter) at its end.
func mkdirP(doc []byte, segs []pathSeg, s mutateSpec) ([]byte, []byte, memd.StatusCode) {
	switch s.op {
	case memd.SubDocOpDictSet, memd.SubDocOpDictAdd, memd.SubDocOpCounter:
	case memd.SubDocOpArrayPushLast, memd.SubDocOpArrayPushFirst, memd.SubDocOpArrayAddUnique:
		s.value = append(append([]byte{'['}, s.value...), ']') // the array too
	default:
		return nil, nil, memd.StatusSubDocPathNotFound
	}
	// The deepest existing object.
	n := len(segs) - 1
	var loc located
	for ; n > 0; n-- {
		l, st := locate(doc, segs[:n])
		if st == memd.StatusSuccess && l.value.Exists() {
			loc = l
			break
		}
	}
	parent := gjson.ParseBytes(doc)
	parent.Index = 0
	if n > 0 {
		parent = loc.value
	}
	if !parent.IsObject() {
		return nil, nil, memd.StatusSubDocPathMismatch
	}
	value, counter := s.value, []byte(nil)
	if s.op == memd.SubDocOpCounter {
		if _, err := strconv.ParseInt(string(value), 10, 64); err != nil {
			return nil, nil, memd.StatusSubDocBadDelta
		}
		counter = value
	}
	for i := len(segs) - 1; i > n; i-- {
		if segs[i].isIdx {
			return nil, nil, memd.StatusSubDocPathNotFound
		}
		value = append(append([]byte{'{'}, member(segs[i].name, value)...), '}')
	}
	if segs[n].isIdx {
		return nil, nil, memd.StatusSubDocPathNotFound
	}
	return insertInto(doc, parent, member(segs[n].name, value), false), counter, memd.StatusSuccess
}

// deleteItem removes the member or element loc points at, with one comma
// beside it.
func deleteItem(doc []byte, loc located) []byte {
	from, to := loc.value.Index, loc.value.Index+len(loc.value.Raw)
	if loc.keyPos >= 0 {
		from = loc.keyPos
	}
	// A following comma goes with it; else a preceding one.
	j := to
	for j < len(doc) && isSpace(doc[j]) {
		j++
	}
	if j < len(doc) && doc[j] == ',' {
		j++
		for j < len(doc) && isSpace(doc[j]) {
			j++
		}
		return splice(doc, from, j, nil)
	}
	i := from - 1
	for i >= 0 && isSpace(doc[i]) {
		i--
	}
	if i >= 0 && doc[i] == ',' {
		return splice(doc, i, to, nil)
	}
	return splice(doc, from, to, nil)
}

func isSpace(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\r' }
