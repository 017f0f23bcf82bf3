package kv

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net"
	"runtime/debug"
	"strconv"

	"github.com/couchbase/gocbcore/v10/memd"

	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/engine"
)

// bufSize is the size of a connection's read and write buffers.
const bufSize = 16 << 10

// Commands memd has no names for.
const (
	cmdGetQ  = memd.CmdCode(0x09)
	cmdGetK  = memd.CmdCode(0x0c)
	cmdGetKQ = memd.CmdCode(0x0d)
)

// conn is one client connection, used by one goroutine.
type conn struct {
	s      *Server
	nc     net.Conn
	r      *bufio.Reader
	w      *bufio.Writer
	out    *memd.Conn // writes answers; no features, so keys go out as given
	remote string
	port   int // the local port, for GET_CLUSTER_CONFIG

	// What HELLO negotiated.
	xerror, json, collections, seqno, xattr, preserveExpiry, altRequests bool

	user   *auth.Principal // nil until SASL succeeds
	scram  *scramState     // a SCRAM exchange between its two steps
	bucket *engine.Bucket  // nil until SELECT_BUCKET
}

// serveConn runs one connection until the client leaves, a bad packet
// closes it, or ctx is done.
func (s *Server) serveConn(ctx context.Context, nc net.Conn) {
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	defer stop()
	defer nc.Close()
	defer func() {
		// A bug must cost one connection, not the server.
		if r := recover(); r != nil {
			s.log.Error("kv: panic serving connection", "remote", nc.RemoteAddr(), "panic", r, "stack", string(debug.Stack()))
		}
	}()
	c := &conn{s: s, nc: nc, remote: nc.RemoteAddr().String()}
	if a, ok := nc.LocalAddr().(*net.TCPAddr); ok {
		c.port = a.Port
	}
	c.w = bufio.NewWriterSize(nc, bufSize)
	c.r = bufio.NewReaderSize(nc, bufSize)
	c.out = memd.NewConn(readWriter{nil, c.w})
	for {
		pkt, h, err := readRequest(c.r, c.collections, s.opts.MaxBodyLen)
		if err != nil {
			c.refusePacket(h, err)
			return
		}
		c.exec(ctx, pkt)
		memd.ReleasePacket(pkt)
		if c.r.Buffered() == 0 {
			if err := c.w.Flush(); err != nil {
				return
			}
		}
	}
}

// refusePacket answers a packet that could not be read, when its header
// came in, before the connection closes.
func (c *conn) refusePacket(h header, err error) {
	var status memd.StatusCode
	switch {
	case errors.Is(err, ErrPacketTooLarge):
		status = memd.StatusTooBig
	case errors.Is(err, ErrBadPacket):
		status = memd.StatusInvalidArgs
	default:
		return // the client left, or the connection broke
	}
	c.s.log.Debug("kv: closing connection", "remote", c.remote, "err", err)
	req := &memd.Packet{Command: h.cmd, Opaque: h.opaque}
	c.fail(req, status, err.Error())
	c.w.Flush()
}

// reply writes an answer to req.
func (c *conn) reply(req *memd.Packet, status memd.StatusCode, extras, key, value []byte, cas uint64, datatype uint8) {
	_ = c.out.WritePacket(&memd.Packet{
		Magic: memd.CmdMagicRes, Command: req.Command, Status: status, Opaque: req.Opaque,
		Cas: cas, Extras: extras, Key: key, Value: value, Datatype: datatype,
	})
}

// ok answers success with no body.
func (c *conn) ok(req *memd.Packet) { c.reply(req, memd.StatusSuccess, nil, nil, nil, 0, 0) }

// fail answers an error status. With XERROR the body is Couchbase's JSON
// error context.
func (c *conn) fail(req *memd.Packet, status memd.StatusCode, reason string) {
	if !c.xerror || reason == "" {
		c.reply(req, status, nil, nil, nil, 0, 0)
		return
	}
	b, _ := json.Marshal(map[string]map[string]string{"error": {"context": reason}})
	c.reply(req, status, nil, nil, b, 0, uint8(memd.DatatypeFlagJSON))
}

// failErr answers err with the status an SDK expects for it.
func (c *conn) failErr(req *memd.Packet, err error) {
	status, reason := statusOf(err)
	c.fail(req, status, reason)
}

// exec runs one request.
func (c *conn) exec(ctx context.Context, pkt *memd.Packet) {
	switch pkt.Command {
	case memd.CmdHello:
		c.hello(pkt)
		return
	case memd.CmdNoop:
		c.ok(pkt)
		return
	case memd.CmdGetErrorMap:
		c.getErrorMap(pkt)
		return
	case memd.CmdSASLListMechs:
		c.reply(pkt, memd.StatusSuccess, nil, nil, []byte(mechList), 0, 0)
		return
	case memd.CmdSASLAuth, memd.CmdSASLStep:
		c.saslAuth(ctx, pkt)
		return
	}
	if c.user == nil {
		c.fail(pkt, memd.StatusAccessError, "authenticate first (SASL)")
		return
	}
	switch pkt.Command {
	case memd.CmdSelectBucket:
		c.selectBucket(pkt)
		return
	case memd.CmdGetClusterConfig:
		c.clusterConfig(pkt)
		return
	}
	op, known := kvOps[pkt.Command]
	if !known {
		c.fail(pkt, memd.StatusUnknownCommand, "command "+strconv.Itoa(int(pkt.Command))+" is not supported by Mayfly")
		return
	}
	if c.bucket == nil {
		c.fail(pkt, memd.StatusNoBucket, "select a bucket first")
		return
	}
	for _, a := range op.need {
		if !c.user.Allows(auth.Permission{Action: a, Bucket: c.bucket.Name()}) {
			perm := auth.Permission{Action: a, Bucket: c.bucket.Name()}
			c.s.log.Warn("kv: request refused", "reason", "forbidden", "remote", c.remote, "user", c.user.Name, "permission", perm.String())
			c.fail(pkt, memd.StatusAccessError, "no access: "+perm.String()+" is needed")
			return
		}
	}
	op.run(c, ctx, pkt)
}

// hello negotiates features: the answer lists those of the client's that
// Mayfly supports, in the client's order.
func (c *conn) hello(pkt *memd.Packet) {
	if len(pkt.Value)%2 != 0 {
		c.fail(pkt, memd.StatusInvalidArgs, "HELLO: the value must be a list of 16-bit features")
		return
	}
	var out []byte
	seen := map[memd.HelloFeature]bool{}
	for i := 0; i+1 < len(pkt.Value); i += 2 {
		f := memd.HelloFeature(binary.BigEndian.Uint16(pkt.Value[i:]))
		if seen[f] {
			continue
		}
		on := true
		switch f {
		case memd.FeatureXerror:
			c.xerror = true
		case memd.FeatureJSON:
			c.json = true
		case memd.FeatureCollections:
			c.collections = true
		case memd.FeatureSeqNo:
			c.seqno = true
		case memd.FeatureXattr:
			c.xattr = true
		case memd.FeaturePreserveExpiry:
			c.preserveExpiry = true
		case memd.FeatureAltRequests:
			c.altRequests = true
		case memd.FeatureSelectBucket, memd.FeatureTCPNoDelay, memd.FeatureDatatype:
		default:
			on = false
		}
		if on {
			seen[f] = true
			out = binary.BigEndian.AppendUint16(out, uint16(f))
		}
	}
	c.s.log.Debug("kv: hello", "remote", c.remote, "agent", string(pkt.Key))
	c.reply(pkt, memd.StatusSuccess, nil, nil, out, 0, 0)
}

// getErrorMap answers with the error map of the version asked for (at
// most 2).
func (c *conn) getErrorMap(pkt *memd.Packet) {
	if len(pkt.Value) != 2 || binary.BigEndian.Uint16(pkt.Value) == 0 {
		c.fail(pkt, memd.StatusInvalidArgs, "GET_ERROR_MAP: the value must be a 16-bit version above 0")
		return
	}
	c.reply(pkt, memd.StatusSuccess, nil, nil, errorMap(min(int(binary.BigEndian.Uint16(pkt.Value)), 2)), 0, uint8(memd.DatatypeFlagJSON))
}

// selectBucket makes the named bucket the connection's.
func (c *conn) selectBucket(pkt *memd.Packet) {
	name := string(pkt.Key)
	if !c.user.SeesBucket(name) {
		c.s.log.Warn("kv: request refused", "reason", "forbidden", "remote", c.remote, "user", c.user.Name, "bucket", name)
		c.fail(pkt, memd.StatusAccessError, "no access to bucket "+strconv.Quote(name))
		return
	}
	b, err := c.s.eng.Bucket(name)
	if err != nil {
		c.failErr(pkt, err)
		return
	}
	c.bucket = b
	c.ok(pkt)
}

// clusterConfig answers GET_CLUSTER_CONFIG: the selected bucket's terse
// configuration, or the cluster's without one.
func (c *conn) clusterConfig(pkt *memd.Packet) {
	b, err := json.Marshal(c.s.config(c.bucket, c.port))
	if err != nil {
		c.failErr(pkt, err)
		return
	}
	c.reply(pkt, memd.StatusSuccess, nil, nil, b, 0, uint8(memd.DatatypeFlagJSON))
}
