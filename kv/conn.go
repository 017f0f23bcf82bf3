package kv

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/couchbase/gocbcore/v10/memd"

	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/engine"
)

// bufSize is the size of a connection's read and write buffers.
const bufSize = 16 << 10

// maxUnauthenticatedBody is the largest packet body a connection may send
// before it authenticates: room for HELLO, SASL (a PLAIN message holds a
// name of at most 128 bytes and a password of at most 1 KiB) and their
// framing extras (Redis bounds its unauthenticated clients alike,
// CVE-2021-32675).
const maxUnauthenticatedBody = 16 << 10

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
	out    *memd.Conn // writes answers (to a buffer per answer); no features, so keys go out as given
	remote string
	port   int  // the local port, for GET_CLUSTER_CONFIG
	tls    bool // the connection came in over TLS

	// What HELLO negotiated.
	xerror, json, collections, seqno, xattr, preserveExpiry, altRequests bool

	user   *auth.Principal // nil until SASL succeeds
	scram  *scramState     // a SCRAM exchange between its two steps
	bucket *engine.Bucket  // nil until SELECT_BUCKET
	gone   string          // the user refreshUser found deleted, for its answer
	// userGen is the users' generation (auth.Store.Generation) user was
	// looked up at: when it moves, route looks the user up again.
	userGen uint64

	// budget bounds the bytes of the connection's unsent answers; seq is
	// the place of the answer this copy of the connection writes (a task's
	// copy, see serveConn) and taken the bytes it took from budget.
	budget *answerBudget
	seq    uint64
	taken  *int
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
	_, c.tls = nc.(*tls.Conn)
	c.w = bufio.NewWriterSize(nc, bufSize)
	c.r = bufio.NewReaderSize(nc, bufSize)

	// Answers leave in request order through writeLoop; key-value commands
	// run concurrently on a Pipeline (so that writes share group commits),
	// in order per document.
	out := make(chan outItem, outQueue)
	written := make(chan struct{})
	c.budget = newAnswerBudget()
	go c.writeLoop(out, written)
	p := engine.NewPipeline(ctx, &engine.PipelineOptions{Window: pipelineWindow, MaxBytes: pipelineBytes})
	defer func() {
		close(out)
		<-written
		p.Wait()
	}()
	for {
		// A client that does not read its answers stops being read once
		// they hold answerBytes, and is read again as it takes them.
		c.budget.waitRoom()
		if err := c.awaitPacket(); err != nil {
			s.log.Debug("kv: closing connection", "remote", c.remote, "err", err)
			return
		}
		maxBody := s.opts.MaxBodyLen
		if c.user == nil {
			// memd sets the whole body aside from the header: before
			// SASL a client gets no more than its bootstrap needs.
			maxBody = min(maxBody, maxUnauthenticatedBody)
		}
		pkt, h, err := readRequest(c.r, c.collections, maxBody)
		if err != nil {
			c.answer(out, func() { c.refusePacket(h, err) })
			return
		}
		var op *kvOp
		c.answer(out, func() { op = c.route(pkt) })
		if op == nil {
			continue
		}
		// The task works on a copy of the connection's state as it is
		// now: later commands (HELLO, SELECT_BUCKET) do not change it.
		tc := *c
		buf := new(bytes.Buffer)
		tc.out = memd.NewConn(readWriter{nil, buf})
		tc.seq, tc.taken = c.seq, new(int)
		c.seq++
		t := p.Go(chainKey(pkt), len(pkt.Key)+len(pkt.Value), func(ctx context.Context) { tc.run(ctx, op, pkt) })
		out <- outItem{task: t, buf: buf, taken: tc.taken}
	}
}

// awaitPacket waits, at most Options.IdleTimeout, for the next packet to
// begin; the rest of it must then come within Options.PacketTimeout.
func (c *conn) awaitPacket() error {
	if c.r.Buffered() == 0 {
		if d := c.s.opts.IdleTimeout; d > 0 {
			c.nc.SetReadDeadline(time.Now().Add(d)) // wall clock: connection timeouts
		} else {
			c.nc.SetReadDeadline(time.Time{})
		}
		if _, err := c.r.Peek(1); err != nil {
			return err
		}
	}
	if d := c.s.opts.PacketTimeout; d > 0 {
		c.nc.SetReadDeadline(time.Now().Add(d)) // wall clock: connection timeouts
	} else {
		c.nc.SetReadDeadline(time.Time{})
	}
	return nil
}

// Bounds of a connection's work in flight.
const (
	// outQueue is the most answers queued for writing.
	outQueue = 1024
	// pipelineWindow is the most key-value commands running at once.
	pipelineWindow = 1024
	// pipelineBytes bounds the keys and values of the commands running.
	pipelineBytes = 32 << 20
	// answerBytes bounds the bytes of a connection's answers written by
	// its commands and not yet taken by the client: past it the
	// connection reads no more requests, and its running commands wait
	// before writing their answers, until the client reads (one answer
	// larger than the bound still goes out, on its own).
	answerBytes = 1 << 20
)

// answerBudget counts the bytes of a connection's unsent answers, which
// leave in request order: each has a place (seq), and the writer is at
// place next. The answer at next never waits, so the writer always has
// one to go on with.
type answerBudget struct {
	mu     sync.Mutex
	cond   sync.Cond
	unsent int    // bytes of answers written to their buffers, not yet sent (or dropped)
	next   uint64 // the place of the answer the writer waits for
	closed bool   // the connection broke: nothing waits any more
}

func newAnswerBudget() *answerBudget {
	b := &answerBudget{}
	b.cond.L = &b.mu
	return b
}

// take waits until the answer at place seq may hold n more bytes, and
// counts them.
func (b *answerBudget) take(seq uint64, n int) {
	b.mu.Lock()
	for !b.closed && seq != b.next && b.unsent > 0 && b.unsent+n > answerBytes {
		b.cond.Wait()
	}
	b.unsent += n
	b.mu.Unlock()
}

// add counts n bytes of an answer written without waiting (one the
// reading goroutine writes, after waitRoom).
func (b *answerBudget) add(n int) {
	b.mu.Lock()
	b.unsent += n
	b.mu.Unlock()
}

// sent says the answer at place seq, of n bytes, is gone.
func (b *answerBudget) sent(seq uint64, n int) {
	b.mu.Lock()
	b.unsent -= n
	b.next = seq + 1
	b.cond.Broadcast()
	b.mu.Unlock()
}

// waitTurn waits, before the command whose answer is at place seq runs,
// while the unsent answers hold answerBytes or more and it is not the
// writer's next: a document read from the store then is not held unsent.
func (b *answerBudget) waitTurn(seq uint64) {
	b.mu.Lock()
	for !b.closed && seq != b.next && b.unsent >= answerBytes {
		b.cond.Wait()
	}
	b.mu.Unlock()
}

// waitRoom waits while the unsent answers hold answerBytes or more.
func (b *answerBudget) waitRoom() {
	b.mu.Lock()
	for !b.closed && b.unsent >= answerBytes {
		b.cond.Wait()
	}
	b.mu.Unlock()
}

// close ends every wait, for good.
func (b *answerBudget) close() {
	b.mu.Lock()
	b.closed = true
	b.cond.Broadcast()
	b.mu.Unlock()
}

// outItem is one answer on its way out: ready, or once its task is done.
type outItem struct {
	task  *engine.Task
	buf   *bytes.Buffer
	taken *int // the bytes the answer took from the connection's budget
}

// writeLoop writes the answers in request order, flushing whenever it
// would otherwise wait. A write that fails, or that the client does not
// take within Options.PacketTimeout, closes the connection; the rest is
// drained unwritten.
func (c *conn) writeLoop(out <-chan outItem, done chan<- struct{}) {
	defer close(done)
	broken := false
	write := func(f func() error) {
		if broken {
			return
		}
		if d := c.s.opts.PacketTimeout; d > 0 {
			c.nc.SetWriteDeadline(time.Now().Add(d)) // wall clock: connection timeouts
		}
		if err := f(); err != nil {
			broken = true
			c.nc.Close()
			c.budget.close()
		}
	}
	flush := func() error { return c.w.Flush() }
	var seq uint64
	for it := range out {
		if it.task != nil {
			select {
			case <-it.task.Done():
			default:
				if c.w.Buffered() > 0 {
					write(flush)
				}
				<-it.task.Done()
			}
		}
		if it.buf.Len() > 0 {
			write(func() error { _, err := c.w.Write(it.buf.Bytes()); return err })
			if len(out) == 0 {
				write(flush)
			}
		}
		// What the buffered writer holds is at most bufSize: the answer
		// counts as sent once it is there.
		c.budget.sent(seq, *it.taken)
		seq++
	}
	write(flush)
	c.budget.close()
}

// answer runs f, which answers on c.out, and queues what it wrote.
func (c *conn) answer(out chan<- outItem, f func()) {
	buf := new(bytes.Buffer)
	c.out = memd.NewConn(readWriter{nil, buf})
	f()
	taken := buf.Len()
	c.budget.add(taken)
	c.seq++
	out <- outItem{buf: buf, taken: &taken}
}

// chainKey names the document a command works on, so that commands on one
// document run in order.
func chainKey(pkt *memd.Packet) string {
	return strconv.FormatUint(uint64(pkt.CollectionID), 16) + "/" + string(pkt.Key)
}

// run runs a key-value command on a Pipeline goroutine. A bug costs the
// connection, not the server.
func (c *conn) run(ctx context.Context, op *kvOp, pkt *memd.Packet) {
	defer func() {
		if r := recover(); r != nil {
			c.s.log.Error("kv: panic running a command", "remote", c.remote, "command", pkt.Command, "panic", r, "stack", string(debug.Stack()))
			c.nc.Close()
		}
	}()
	c.budget.waitTurn(c.seq)
	// A durability frame's timeout bounds the write's wait for its level
	// (failErr answers SYNC_WRITE_AMBIGUOUS past it).
	if t := pkt.DurabilityTimeoutFrame; t != nil && t.DurabilityTimeout > 0 && pkt.DurabilityLevelFrame != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.DurabilityTimeout)
		defer cancel()
	}
	// A read a cluster node answers as the partition's leader (route
	// checked Serves) is confirmed first, here rather than in route so
	// that the connection's reads share rounds: a leader cut off from the
	// others, or deposed unaware, answers nothing from its memory.
	if readOnly(op.need) && !copyCommand(pkt) {
		if err := c.bucket.ConfirmKeyRead(ctx, string(pkt.Key)); err != nil {
			c.failErr(pkt, err)
			return
		}
	}
	op.run(c, ctx, pkt)
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
}

// reply writes an answer to req.
func (c *conn) reply(req *memd.Packet, status memd.StatusCode, extras, key, value []byte, cas uint64, datatype uint8) {
	if c.taken != nil {
		// A command's answer waits for room among the connection's unsent
		// answers (answerBytes) before it is copied out.
		n := 24 + len(extras) + len(key) + len(value)
		c.budget.take(c.seq, n)
		*c.taken += n
	}
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

// failErr answers err with the status an SDK expects for it (a durable
// write past its durability timeout: SYNC_WRITE_AMBIGUOUS). A
// NOT_MY_VBUCKET carries the bucket's configuration (the cluster's
// current layout) in its body, as Couchbase's does: the SDK takes it and
// sends the request to the partition's leader.
func (c *conn) failErr(req *memd.Packet, err error) {
	status, reason := statusOf(err)
	if req.DurabilityLevelFrame != nil && errors.Is(err, context.DeadlineExceeded) {
		// Past the durability frame's timeout (run): the write may still
		// commit, as Couchbase's sync write past its timeout may have.
		status, reason = memd.StatusSyncWriteAmbiguous, "the durability level was not met within the request's durability timeout; the write may yet be committed"
	}
	if status == memd.StatusNotMyVBucket && c.bucket != nil {
		if b, jerr := json.Marshal(c.s.config(c.bucket, c.port, c.tls)); jerr == nil {
			c.reply(req, status, nil, nil, b, 0, uint8(memd.DatatypeFlagJSON))
			return
		}
	}
	c.fail(req, status, reason)
}

// route answers a request that is not a key-value command, or a refused
// one, at once; for a key-value command allowed to run it answers nothing
// and returns the command.
func (c *conn) route(pkt *memd.Packet) *kvOp {
	ctx := c.s.ctx
	// The framing extras are checked first, as Couchbase's validators do
	// (before authentication): any command may carry them.
	if !c.checkFrameInfo(pkt) || !c.checkDurability(pkt) {
		return nil
	}
	switch pkt.Command {
	case memd.CmdHello:
		c.hello(pkt)
		return nil
	case memd.CmdNoop:
		c.ok(pkt)
		return nil
	case memd.CmdGetErrorMap:
		c.getErrorMap(pkt)
		return nil
	case memd.CmdSASLListMechs:
		c.reply(pkt, memd.StatusSuccess, nil, nil, []byte(mechList), 0, 0)
		return nil
	case memd.CmdSASLAuth, memd.CmdSASLStep:
		c.saslAuth(ctx, pkt)
		return nil
	}
	if c.user == nil {
		c.fail(pkt, memd.StatusAccessError, "authenticate first (SASL)")
		return nil
	}
	if !c.refreshUser() {
		c.fail(pkt, memd.StatusAccessError, "user "+strconv.Quote(c.gone)+" no longer exists: authenticate again")
		return nil
	}
	switch pkt.Command {
	case memd.CmdSelectBucket:
		c.selectBucket(pkt)
		return nil
	case memd.CmdGetClusterConfig:
		c.clusterConfig(pkt)
		return nil
	}
	op, known := kvOps[pkt.Command]
	if !known {
		c.fail(pkt, memd.StatusUnknownCommand, "command "+strconv.Itoa(int(pkt.Command))+" is not supported by Mayfly")
		return nil
	}
	if c.bucket == nil {
		c.fail(pkt, memd.StatusNoBucket, "select a bucket first")
		return nil
	}
	if nb := c.bucket.Reopened(); nb != nil {
		c.bucket = nb // the bucket restarted (a change of its evictionPolicy)
	}
	if !c.user.SeesBucket(c.bucket.Name()) {
		// Its roles changed since SELECT_BUCKET (refreshUser).
		c.fail(pkt, memd.StatusAccessError, "no access to bucket "+strconv.Quote(c.bucket.Name()))
		return nil
	}
	for _, a := range op.need {
		if !c.user.Allows(auth.Permission{Action: a, Bucket: c.bucket.Name()}) {
			perm := auth.Permission{Action: a, Bucket: c.bucket.Name()}
			c.s.log.Warn("kv: request refused", "reason", "forbidden", "remote", c.remote, "user", c.user.Name, "permission", perm.String())
			c.fail(pkt, memd.StatusAccessError, "no access: "+perm.String()+" is needed")
			return nil
		}
	}
	if copyCommand(pkt) {
		return c.routeCopy(pkt, op) // any node holding a copy answers it
	}
	// On a cluster node only a key's partition leader answers it: the
	// others say NOT_MY_VBUCKET with the configuration (failErr), and the
	// SDK goes there.
	if keyed(op.need) {
		// A vBucket the bucket does not have is no node's, as Couchbase
		// answers it (an SDK that mapped the key with another count).
		if n := c.bucket.NumPartitions(); int(pkt.Vbucket) >= n {
			c.failErr(pkt, fmt.Errorf("%w: vBucket %d: bucket %q has vBuckets 0 to %d", engine.ErrNotMyVBucket, pkt.Vbucket, c.bucket.Name(), n-1))
			return nil
		}
		if err := c.bucket.Serves(ctx, string(pkt.Key)); err != nil {
			c.failErr(pkt, err)
			return nil
		}
	}
	return &op
}

// login makes p the connection's user, as of the users' generation gen
// (read before p was authenticated), with no bucket selected.
func (c *conn) login(p *auth.Principal, gen uint64) {
	c.user, c.userGen, c.bucket, c.gone = p, gen, nil, ""
}

// usersGeneration is the users' generation now (0 without users).
func (c *conn) usersGeneration() uint64 {
	if c.s.opts.Auth == nil {
		return 0
	}
	return c.s.opts.Auth.Generation()
}

// refreshUser looks the connection's user up again when the users have
// changed since it was last looked up, as Couchbase's memcached rebuilds a
// connection's privileges: changed roles apply from this command on, and
// a deleted user is logged out (false; the connection must authenticate
// again), also when a user of its name was created since
// (auth.Store.Refresh: another incarnation, whose roles are not this
// connection's).
func (c *conn) refreshUser() bool {
	gen := c.usersGeneration()
	if gen == c.userGen {
		return true
	}
	p, err := c.s.opts.Auth.Refresh(c.user)
	if err != nil {
		c.s.log.Warn("kv: user no longer exists: logged out", "remote", c.remote, "user", c.user.Name, "err", err)
		c.gone = c.user.Name
		c.user, c.bucket = nil, nil
		return false
	}
	c.user, c.userGen = p, gen
	return true
}

// keyed reports whether a command needing need is about one document.
func keyed(need []auth.Action) bool {
	for _, a := range need {
		if a == auth.DataRead || a == auth.DataWrite {
			return true
		}
	}
	return false
}

// readOnly reports whether a command needing need only reads a document
// (a write that returns it, such as get-and-touch, is ordered by the
// partition's log instead).
func readOnly(need []auth.Action) bool {
	return len(need) == 1 && need[0] == auth.DataRead
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
		case memd.FeatureSelectBucket, memd.FeatureTCPNoDelay, memd.FeatureDatatype,
			memd.FeatureSyncReplication,   // durability frames (durabilityOf)
			memd.FeatureSubdocReplicaRead: // lookups' replica-read flag (replicaRead)
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
	b, err := json.Marshal(c.s.config(c.bucket, c.port, c.tls))
	if err != nil {
		c.failErr(pkt, err)
		return
	}
	c.reply(pkt, memd.StatusSuccess, nil, nil, b, 0, uint8(memd.DatatypeFlagJSON))
}
