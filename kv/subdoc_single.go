package kv

import (
	"context"
	"encoding/binary"

	"github.com/couchbase/gocbcore/v10/memd"
)

// singlePath is a single-path sub-document request: its extras are the
// path's length, the path flags, an optional expiry (mutations) and
// optional document flags; its value is the path, then the value.
type singlePath struct {
	path     string
	value    []byte
	flags    memd.SubdocFlag
	expiry   uint32
	docFlags memd.SubdocDocFlag
}

// parseSinglePath reads a single-path request. Lookups take 3 or 4 bytes
// of extras, mutations 3, 4, 7 or 8.
func parseSinglePath(pkt *memd.Packet, mutation bool) (singlePath, bool) {
	var sp singlePath
	ext := pkt.Extras
	switch len(ext) {
	case 3, 4:
	case 7, 8:
		if !mutation {
			return sp, false
		}
	default:
		return sp, false
	}
	n := int(binary.BigEndian.Uint16(ext))
	if n > len(pkt.Value) {
		return sp, false
	}
	sp.flags = memd.SubdocFlag(ext[2])
	if len(ext) >= 7 {
		sp.expiry = binary.BigEndian.Uint32(ext[3:])
	}
	if len(ext)%2 == 0 {
		sp.docFlags = memd.SubdocDocFlag(ext[len(ext)-1])
	}
	sp.path, sp.value = string(pkt.Value[:n]), pkt.Value[n:]
	return sp, true
}

// lookupPath runs SUBDOC_GET, SUBDOC_EXISTS and SUBDOC_GET_COUNT: the
// multi-lookup's code (lookupOne) on one path, whose status is the
// answer's (PATH_ENOENT, PATH_MISMATCH, DOC_NOT_JSON, ...), and the
// value GET's and GET_COUNT's body. The replica-read document flag
// reads this node's replica, as the multi-lookup's does.
func (c *conn) lookupPath(ctx context.Context, pkt *memd.Packet) {
	sp, ok := parseSinglePath(pkt, false)
	if !ok || len(sp.value) != 0 {
		c.fail(pkt, memd.StatusInvalidArgs, "extras must be path length, path flags [, document flags]; the value the path alone")
		return
	}
	d, err := c.lookupDoc(ctx, pkt, "single-path lookup")
	if err != nil {
		c.failErr(pkt, err)
		return
	}
	st, v := c.lookupOne(d, lookupSpec{op: memd.SubDocOpType(pkt.Command), xattr: sp.flags&memd.SubdocFlagXattrPath != 0, path: sp.path})
	if st != memd.StatusSuccess {
		c.fail(pkt, st, "")
		return
	}
	var datatype uint8
	if c.json && len(v) > 0 {
		datatype = uint8(memd.DatatypeFlagJSON)
	}
	c.reply(pkt, memd.StatusSuccess, nil, nil, v, c.lookupCAS(pkt, d), datatype)
}

// mutatePath runs the single-path mutations (dictionary add and upsert,
// delete, replace, array push first and last, array insert, array
// add-unique, counter): the multi-mutation's code (mutate) on one path,
// whose status is the answer's. A counter's answer is its new value.
func (c *conn) mutatePath(ctx context.Context, pkt *memd.Packet) {
	sp, ok := parseSinglePath(pkt, true)
	if !ok {
		c.fail(pkt, memd.StatusInvalidArgs, "extras must be path length, path flags [, expiry] [, document flags]")
		return
	}
	m := mutation{docFlags: sp.docFlags}
	m.wo.Expiry = int64(sp.expiry)
	spec := mutateSpec{op: memd.SubDocOpType(pkt.Command), flags: sp.flags, path: sp.path, value: sp.value}
	d, results, _, st, err := c.mutate(ctx, pkt, []mutateSpec{spec}, m)
	switch {
	case err != nil:
		c.failErr(pkt, err)
	case st != memd.StatusSuccess:
		c.fail(pkt, st, "")
	default:
		var v []byte
		if len(results) > 7 { // index, status, length, value
			v = results[7:]
		}
		c.reply(pkt, memd.StatusSuccess, c.mutationExtras(d), nil, v, d.CAS, 0)
	}
}
