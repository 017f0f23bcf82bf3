package kv

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/couchbase/gocbcore/v10/memd"
	"github.com/tidwall/gjson"

	"github.com/mayflydb/mayfly/engine"
)

// maxLookupSpecs is the most paths one SUBDOC_MULTI_LOOKUP may hold, as in
// Couchbase.
const maxLookupSpecs = 16

// lookupSpec is one path of a multi-lookup.
type lookupSpec struct {
	op    memd.SubDocOpType
	xattr bool
	path  string
}

// errSpecs reports a multi-lookup body that does not parse.
var errSpecs = errors.New("malformed lookup specs")

// parseLookupSpecs reads a multi-lookup body: per path an opcode, flags, a
// 16-bit path length and the path.
func parseLookupSpecs(b []byte) ([]lookupSpec, error) {
	var specs []lookupSpec
	for len(b) > 0 {
		if len(b) < 4 {
			return nil, errSpecs
		}
		n := int(binary.BigEndian.Uint16(b[2:]))
		if len(b) < 4+n {
			return nil, errSpecs
		}
		specs = append(specs, lookupSpec{op: memd.SubDocOpType(b[0]), xattr: memd.SubdocFlag(b[1])&memd.SubdocFlagXattrPath != 0, path: string(b[4 : 4+n])})
		b = b[4+n:]
		if len(specs) > maxLookupSpecs {
			return nil, fmt.Errorf("%w: more than %d paths", errSpecs, maxLookupSpecs)
		}
	}
	if len(specs) == 0 {
		return nil, fmt.Errorf("%w: no paths", errSpecs)
	}
	return specs, nil
}

// lookupIn runs SUBDOC_MULTI_LOOKUP: plain JSON paths (get, exists, get
// count, the whole document) and the virtual extended attributes
// $document and $document.<field>. Mayfly keeps no user extended
// attributes: any other xattr path is not found. The answer holds a
// status and a value per path; the overall status is success, or
// SUBDOC_MULTI_PATH_FAILURE when a path failed. With the replica-read
// document flag it reads this node's replica of the document (lookupDoc),
// on a node holding one.
func (c *conn) lookupIn(ctx context.Context, pkt *memd.Packet) {
	specs, err := parseLookupSpecs(pkt.Value)
	if err != nil {
		c.fail(pkt, memd.StatusInvalidArgs, err.Error())
		return
	}
	d, err := c.lookupDoc(ctx, pkt, "SUBDOC_MULTI_LOOKUP")
	if err != nil {
		c.failErr(pkt, err)
		return
	}
	var out []byte
	overall := memd.StatusSuccess
	for _, s := range specs {
		st, v := c.lookupOne(d, s)
		if st != memd.StatusSuccess {
			overall = memd.StatusSubDocBadMulti
		}
		out = binary.BigEndian.AppendUint16(out, uint16(st))
		out = binary.BigEndian.AppendUint32(out, uint32(len(v)))
		out = append(out, v...)
	}
	c.reply(pkt, overall, nil, nil, out, c.lookupCAS(pkt, d), 0)
}

// lookupOne answers one path of a multi-lookup.
func (c *conn) lookupOne(d *engine.Document, s lookupSpec) (memd.StatusCode, []byte) {
	if s.xattr {
		if s.op != memd.SubDocOpGet && s.op != memd.SubDocOpExists {
			return memd.StatusSubDocPathInvalid, nil
		}
		st, v := c.virtualXattr(d, s.path)
		if s.op == memd.SubDocOpExists {
			v = nil
		}
		return st, v
	}
	if s.op == memd.SubDocOpGetDoc {
		if s.path != "" {
			return memd.StatusSubDocPathInvalid, nil
		}
		return memd.StatusSuccess, d.Value
	}
	if d.Type != engine.TypeJSON {
		return memd.StatusSubDocNotJSON, nil
	}
	r, st := jsonPath(d.Value, s.path)
	if st != memd.StatusSuccess {
		return st, nil
	}
	switch s.op {
	case memd.SubDocOpGet:
		return memd.StatusSuccess, []byte(r.Raw)
	case memd.SubDocOpExists:
		return memd.StatusSuccess, nil
	case memd.SubDocOpGetCount:
		if !r.IsArray() && !r.IsObject() {
			return memd.StatusSubDocPathMismatch, nil
		}
		n := 0
		r.ForEach(func(_, _ gjson.Result) bool { n++; return true })
		return memd.StatusSuccess, []byte(strconv.Itoa(n))
	}
	return memd.StatusSubDocPathInvalid, nil
}

// virtualXattr answers a $document path: the whole object, or one field.
func (c *conn) virtualXattr(d *engine.Document, path string) (memd.StatusCode, []byte) {
	field, isDoc := strings.CutPrefix(path, "$document")
	if !isDoc || (field != "" && field[0] != '.') {
		if strings.HasPrefix(path, "$") {
			return memd.StatusSubDocXattrUnknownVAttr, nil
		}
		return memd.StatusSubDocPathNotFound, nil // no user extended attributes
	}
	datatype := []string{"raw"}
	if d.Type == engine.TypeJSON {
		datatype = []string{"json"}
	}
	doc := map[string]any{
		"CAS":           fmt.Sprintf("0x%016x", d.CAS),
		"vbucket_uuid":  fmt.Sprintf("0x%016x", c.bucket.UUID()),
		"seqno":         fmt.Sprintf("0x%016x", d.Seq),
		"revid":         strconv.FormatUint(d.RevSeq, 10),
		"exptime":       d.Expiration,
		"value_bytes":   len(d.Value),
		"deleted":       d.Deleted,
		"flags":         d.Flags,
		"datatype":      datatype,
		"last_modified": strconv.FormatInt(d.TS, 10),
	}
	if field == "" {
		b, _ := json.Marshal(doc)
		return memd.StatusSuccess, b
	}
	v, ok := doc[field[1:]]
	if !ok {
		return memd.StatusSubDocPathNotFound, nil
	}
	b, _ := json.Marshal(v)
	return memd.StatusSuccess, b
}

// pathSeg is one step of a sub-document path: a field name or an array
// index (negative from the end).
type pathSeg struct {
	name  string
	index int
	isIdx bool
}

// parsePath reads a sub-document path: fields joined by dots, names
// quoted in backticks (“ is a backtick) where they hold dots or brackets,
// and array indexes in brackets.
func parsePath(p string) ([]pathSeg, bool) {
	var segs []pathSeg
	i := 0
	expectName := true
	for i < len(p) {
		switch {
		case p[i] == '[':
			j := strings.IndexByte(p[i:], ']')
			if j < 0 {
				return nil, false
			}
			n, err := strconv.Atoi(p[i+1 : i+j])
			if err != nil {
				return nil, false
			}
			segs = append(segs, pathSeg{index: n, isIdx: true})
			i += j + 1
			expectName = false
		case p[i] == '.':
			if expectName {
				return nil, false
			}
			i++
			expectName = true
		case !expectName:
			return nil, false
		case p[i] == '`':
			var name strings.Builder
			i++
			for {
				if i >= len(p) {
					return nil, false
				}
				if p[i] == '`' {
					if i+1 < len(p) && p[i+1] == '`' {
						name.WriteByte('`')
						i += 2
						continue
					}
					i++
					break
				}
				name.WriteByte(p[i])
				i++
			}
			segs = append(segs, pathSeg{name: name.String()})
			expectName = false
		default:
			j := i
			for j < len(p) && p[j] != '.' && p[j] != '[' {
				j++
			}
			segs = append(segs, pathSeg{name: p[i:j]})
			i = j
			expectName = false
		}
	}
	if expectName && len(segs) > 0 {
		return nil, false // a trailing dot
	}
	return segs, len(segs) > 0
}

// jsonPath finds path in the JSON document doc.
func jsonPath(doc []byte, path string) (gjson.Result, memd.StatusCode) {
	segs, ok := parsePath(path)
	if !ok {
		return gjson.Result{}, memd.StatusSubDocPathInvalid
	}
	r := gjson.ParseBytes(doc)
	for _, s := range segs {
		if s.isIdx {
			if !r.IsArray() {
				return r, memd.StatusSubDocPathMismatch
			}
			arr := r.Array()
			i := s.index
			if i < 0 {
				i += len(arr)
			}
			if i < 0 || i >= len(arr) {
				return r, memd.StatusSubDocPathNotFound
			}
			r = arr[i]
			continue
		}
		if !r.IsObject() {
			return r, memd.StatusSubDocPathMismatch
		}
		var found gjson.Result
		ok := false
		r.ForEach(func(k, v gjson.Result) bool {
			if k.String() == s.name {
				found, ok = v, true
				return false
			}
			return true
		})
		if !ok {
			return r, memd.StatusSubDocPathNotFound
		}
		r = found
	}
	return r, memd.StatusSuccess
}
