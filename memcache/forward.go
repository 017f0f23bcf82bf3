package memcache

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mayflydb/mayfly/engine"
)

// Forwarding (issue 22 step 3). On a cluster node (Options.Route set) a
// command for a key whose partition another node leads is carried out by
// that node: the command is sent, as a memcached command line (and data
// block), over a pooled connection to the leader's memcached port, and its
// reply is the client's. A multi-get asks each node for its keys in one
// command, the nodes together, and answers in the keys' order
// (forwardget.go); pipelined writes stay on the connection's pipeline, in
// order. A forwarding connection opens with
// "mayfly_forwarded": the node it reaches carries out its commands itself
// and never forwards them again (a partition it no longer leads refuses
// the write naming the leader, as before routing). A Route may say where
// else to go (Route.Reroute): when its node cannot be reached (the command
// was not sent) the command goes to the node Reroute names instead, once;
// when its node refuses it naming the partition's leader ("... led by node
// NAME ..."), it goes there, once. A write this node carries out itself,
// its route saying it leads the key's partition, that its replication
// refuses naming another leader before doing anything of it
// (engine.NotMyVBucketError) goes to that leader the same way, once
// (Server.followed); on a forwarded connection that refusal is the reply,
// for the forwarding node to follow. Every hop is made by the node the
// client reached.

// Route says where a command for a key is carried out.
type Route struct {
	// Node is the name of the node leading the key's partition.
	Node string
	// Addr is that node's memcached address (host:port); empty when this
	// node carries the command out itself.
	Addr string
	// Barrier, when set on a Route without Addr (this node leads the
	// key's partition), confirms a read before this node answers it from
	// its memory (a read index: it still leads, and has applied every
	// write acknowledged before); its error is the read's SERVER_ERROR.
	// A multi-get takes it once for each Partition. Writes do not take
	// it: the partition's log orders them.
	Barrier func(ctx context.Context) error
	// Partition is the key's partition, with Barrier.
	Partition int
	// Reroute, when set on a Route with Addr, is asked for another route
	// of the same key: with leader "" when Node could not be reached (the
	// command was not sent), or with the node Node's refusal named (a
	// SERVER_ERROR line saying "not my vbucket" and "led by node NAME").
	// Each is asked at most once a command. ok is false when there is
	// nowhere else to go: the command is then answered with what the
	// forward met. Set on a Route without Addr, it is asked with the
	// leader this node's replication named when it refused a write
	// (engine.FollowableLeader), once, and the write goes there.
	Reroute func(ctx context.Context, leader string) (rt Route, ok bool)
	// Gone, when set on a Route with Addr, is closed once Node is known
	// to be down (its lease expired: cut off, or dead): a command in
	// flight to it is then abandoned (a SERVER_ERROR, its outcome
	// unknown) rather than waited out.
	Gone <-chan struct{}
}

// forwardHello opens a forwarding connection; the reply is "OK".
const forwardHello = "mayfly_forwarded"

// Bounds of forwarding.
const (
	fwdDialTimeout = 5 * time.Second
	// fwdTimeout bounds a forwarded command's round trip when its context
	// has no deadline: longer than a replicated write's own bound (30 s).
	fwdTimeout = 45 * time.Second
	// fwdIdle is how long a pooled connection may idle before it is
	// dropped rather than reused; one the leader closed sooner (its idle
	// timeout shorter) is found closed before reuse (forwarder.get).
	fwdIdle     = 30 * time.Second
	fwdMaxIdle  = 16 // pooled connections kept per leader
	fwdMaxValue = engine.MaxValueLen + 1<<10
)

// errNotSent is a forward's failure to reach its node (a dial, or the
// forwarding connection's opening): the command was not sent.
var errNotSent = errors.New("the command was not sent")

// errForward is a forwarding failure: the leader could not be reached or
// broke off; a write's outcome is then unknown.
var errForward = errors.New("memcache: forwarding to the partition's leader failed")

// fwdConn is a connection to a leader's memcached port.
type fwdConn struct {
	c    net.Conn
	r    *bufio.Reader
	used time.Time
}

// forwarder pools connections to the leaders' memcached ports.
type forwarder struct {
	mu     sync.Mutex
	idle   map[string][]*fwdConn
	closed bool
	// sent counts the commands sent to a leader (each hop of each
	// command, each batch of a multi-get), for tests and benchmarks.
	sent atomic.Int64
}

// close closes the pooled connections; later ones are closed once used.
func (f *forwarder) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	for _, cs := range f.idle {
		for _, c := range cs {
			c.c.Close()
		}
	}
	f.idle = nil
}

// get returns a pooled connection to addr (pooled true) or dials one. A
// pooled connection the leader has closed since (its idle timeout, or a
// restart), or that holds bytes no command asked for, is closed and not
// used: nothing was sent on it.
func (f *forwarder) get(ctx context.Context, addr string) (c *fwdConn, pooled bool, err error) {
	f.mu.Lock()
	for cs := f.idle[addr]; len(cs) > 0; cs = f.idle[addr] {
		c := cs[len(cs)-1]
		f.idle[addr] = cs[:len(cs)-1]
		if time.Since(c.used) < fwdIdle && c.r.Buffered() == 0 && !peerClosed(c.c) { // wall clock: network idleness
			f.mu.Unlock()
			return c, true, nil
		}
		c.c.Close()
	}
	f.mu.Unlock()
	c, err = f.dial(ctx, addr)
	return c, false, err
}

// dial opens a forwarding connection to addr.
func (f *forwarder) dial(ctx context.Context, addr string) (*fwdConn, error) {
	d := net.Dialer{Timeout: fwdDialTimeout}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &fwdConn{c: nc, r: bufio.NewReader(nc)}
	nc.SetDeadline(time.Now().Add(fwdDialTimeout)) // wall clock: network timeout
	if _, err := nc.Write([]byte(forwardHello + "\r\n")); err != nil {
		nc.Close()
		return nil, err
	}
	line, err := c.r.ReadString('\n')
	if err != nil || line != replyOK+"\r\n" {
		nc.Close()
		if err == nil {
			err = fmt.Errorf("it answered %q to %s (a node without routing?)", trimCRLF(line), forwardHello)
		}
		return nil, err
	}
	return c, nil
}

// put returns a healthy connection to the pool, without a deadline (an
// expired one would fail the peek of get).
func (f *forwarder) put(addr string, c *fwdConn) {
	c.used = time.Now() // wall clock: network idleness
	c.c.SetDeadline(time.Time{})
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed || len(f.idle[addr]) >= fwdMaxIdle {
		c.c.Close()
		return
	}
	if f.idle == nil {
		f.idle = map[string][]*fwdConn{}
	}
	f.idle[addr] = append(f.idle[addr], c)
}

// fwdValue is one VALUE block of a forwarded retrieval.
type fwdValue struct {
	flags uint32
	cas   uint64
	value []byte
}

// valueFunc takes one VALUE block of a forwarded retrieval's reply, in
// the order the leader sent them; its error ends the exchange.
type valueFunc func(key string, v *fwdValue) error

// do sends req to addr and reads its reply: the reply line of a command
// that is not a retrieval (values nil); for a retrieval each VALUE block,
// handed to values in the order it came, and the line that ends them
// ("END", or an error line). An error of values ends the exchange with it
// (the connection is closed). A pooled connection that proves dead with
// nothing of req sent (its write refused at once by a closed or reset
// socket), or, for a retrieval, closed before any of its reply came, is
// replaced by a fresh one and req sent there, once; a write that may have
// reached the leader is never sent again.
func (f *forwarder) do(ctx context.Context, addr string, req []byte, values valueFunc) (line string, err error) {
	c, pooled, err := f.get(ctx, addr)
	if err != nil {
		return "", fmt.Errorf("%w: %w", errNotSent, err)
	}
	line, err = f.round(ctx, addr, c, req, values)
	if err != nil && pooled && (errors.Is(err, errNotSent) || values != nil && errors.Is(err, errNoReply)) {
		if c, err = f.dial(ctx, addr); err != nil {
			return "", fmt.Errorf("%w: %w", errNotSent, err)
		}
		line, err = f.round(ctx, addr, c, req, values)
	}
	return line, err
}

// round is one exchange of do on c, which it returns to the pool or
// closes.
func (f *forwarder) round(ctx context.Context, addr string, c *fwdConn, req []byte, values valueFunc) (string, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(fwdTimeout) // wall clock: network timeout
	}
	c.c.SetDeadline(deadline)
	f.sent.Add(1)
	stop := context.AfterFunc(ctx, func() { c.c.SetDeadline(time.Unix(1, 0)) })
	line, err := c.exchange(req, values)
	if err != nil {
		stop()
		c.c.Close()
		return "", err
	}
	// A cancellation that began (stop false) sets its expired deadline
	// from a goroutine of its own, possibly once the connection is back in
	// the pool and another command's: the connection is not reused.
	if !stop() || leaderCloses(line, values != nil) {
		c.c.Close()
		return line, nil
	}
	f.put(addr, c)
	return line, nil
}

// errNoReply is an exchange's failure on a connection the leader closed
// or reset before any byte of the reply came (the request may have
// reached it).
var errNoReply = errors.New("the leader closed the connection before replying")

// deadSocket reports whether err, a connection's, says the leader closed
// or reset it.
func deadSocket(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
}

// leaderCloses reports whether the leader closes its end after the reply
// line: a retrieval it could not answer whole (any line but END) always;
// an error reply to anything else, to be safe (a fresh connection costs a
// dial, a pooled dead one the client's next command).
func leaderCloses(line string, retrieval bool) bool {
	if retrieval && line != replyEnd {
		return true
	}
	return strings.HasPrefix(line, "SERVER_ERROR") || strings.HasPrefix(line, "CLIENT_ERROR") || line == replyError
}

// exchange writes req and reads its reply; values, when set (a
// retrieval), takes each VALUE block.
func (c *fwdConn) exchange(req []byte, values valueFunc) (string, error) {
	if n, err := c.c.Write(req); err != nil {
		if n == 0 && deadSocket(err) {
			// The socket refused the write: no byte of it was sent.
			return "", fmt.Errorf("%w: %w", errNotSent, err)
		}
		return "", err
	}
	first := true
	for {
		l, err := c.r.ReadString('\n')
		if err != nil {
			if first && l == "" && deadSocket(err) {
				return "", fmt.Errorf("%w: %w", errNoReply, err)
			}
			return "", err
		}
		first = false
		l = trimCRLF(l)
		if values == nil || !strings.HasPrefix(l, "VALUE ") {
			return l, nil
		}
		// VALUE <key> <flags> <bytes> [<cas>]
		f := strings.Fields(l)
		if len(f) < 4 || len(f) > 5 {
			return "", fmt.Errorf("an unexpected reply line %q", l)
		}
		flags, err1 := strconv.ParseUint(f[2], 10, 32)
		n, err2 := strconv.Atoi(f[3])
		if err1 != nil || err2 != nil || n < 0 || n > fwdMaxValue {
			return "", fmt.Errorf("an unexpected reply line %q", l)
		}
		v := &fwdValue{flags: uint32(flags)}
		if len(f) > 4 {
			if v.cas, err = strconv.ParseUint(f[4], 10, 64); err != nil {
				return "", fmt.Errorf("an unexpected reply line %q", l)
			}
		}
		v.value = make([]byte, n+2)
		if _, err := ioReadFull(c.r, v.value); err != nil {
			return "", err
		}
		if !bytes.HasSuffix(v.value, []byte("\r\n")) {
			return "", fmt.Errorf("a value block without its \\r\\n")
		}
		v.value = v.value[:n]
		if err := values(f[1], v); err != nil {
			return "", err
		}
	}
}

// ioReadFull reads len(p) bytes from r.
func ioReadFull(r *bufio.Reader, p []byte) (int, error) {
	n := 0
	for n < len(p) {
		m, err := r.Read(p[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func trimCRLF(s string) string {
	for len(s) > 0 && (s[len(s)-1] == '\n' || s[len(s)-1] == '\r') {
		s = s[:len(s)-1]
	}
	return s
}

// routeOf says whether key's command goes to another node: ok true with
// its route, or a reply line (non-empty) when the key's partition has no
// leader to go to. On a forwarded connection (the forwarding node sent
// the command here as to the partition's leader) the command is routed
// too, never forwarded again: carried out here (a read takes its Route's
// Barrier); for a partition this node does not lead (any more) it is
// refused naming the leader, before anything looks at this node's copy,
// which may lag (an append, a cas or an incr would otherwise answer
// NOT_STORED or NOT_FOUND from it), and the forwarding node may follow
// the name (Route.Reroute).
func (c *session) routeOf(ctx context.Context, key string) (rt Route, reply string, ok bool) {
	s := c.s
	if s.opts.Route == nil {
		return Route{}, "", false
	}
	if !c.drv.mayBlock() {
		// An event loop serves many connections: Route must answer at
		// once (a partition whose leader it does not know is refused,
		// not waited for).
		if c.noWait == nil {
			nc, cancel := context.WithCancel(context.WithoutCancel(ctx))
			cancel()
			c.noWait = nc
		}
		ctx = c.noWait
	}
	rt, err := s.opts.Route(ctx, key)
	switch {
	case err != nil:
		return Route{}, serverError(err), true
	case rt.Addr == "":
		if c.forwarded {
			// A refusal by this node's replication is answered, naming
			// the leader, for the forwarding node to follow: not
			// followed here (Server.followed).
			rt.Reroute = nil
		}
		return rt, "", false // its Barrier, for a read
	case c.forwarded:
		return Route{}, serverError(fmt.Errorf("%w: key %q's partition is led by node %s; this node does not lead it and does not forward a command forwarded already",
			engine.ErrNotMyVBucket, key, rt.Node)), true
	}
	return rt, "", true
}

// confirmRead takes rt's Barrier for a read carried out here, once per
// partition for the multi-get being answered; reply, when set, refuses the
// read. block says the barrier may wait and the driver may not: the
// command is to be run again where it may.
func (c *session) confirmRead(ctx context.Context, rt Route) (reply string, block bool) {
	if rt.Barrier == nil {
		return "", false
	}
	if _, ok := c.confirmed[rt.Partition]; ok {
		return "", false
	}
	if !c.drv.mayBlock() {
		return "", true
	}
	if err := rt.Barrier(ctx); err != nil {
		return serverError(err), false
	}
	if c.confirmed == nil {
		c.confirmed = map[int]struct{}{}
	}
	c.confirmed[rt.Partition] = struct{}{}
	return "", false
}

// forwardReply carries out req at rt's node and returns its reply line
// (a write's or a touch's), or a SERVER_ERROR saying why it could not.
func (s *Server) forwardReply(ctx context.Context, rt Route, req []byte) string {
	line, rt, err := s.forwardDo(ctx, rt, req, nil)
	if err != nil {
		return s.forwardFailed(rt, err)
	}
	return line
}

// followed answers a write this node ran itself, its route rt (without
// Addr) saying it leads the key's partition, which its replication
// refused naming the leader: err, and r its reply (refused). The
// command, req as the leader is sent it, is carried out at the node rt's
// Reroute gives for that leader (engine.FollowableLeader: the structured
// refusal, not its text), once, as a forward's refusal is followed (that
// node's own refusal is then the reply). r stands when there is nowhere
// to go. Nothing of the write was done here.
func (s *Server) followed(ctx context.Context, rt Route, r string, err error, req []byte) string {
	leader := engine.FollowableLeader(err)
	if rt.Reroute == nil || leader == "" {
		return r
	}
	next, ok := rt.Reroute(ctx, leader)
	if !ok || next.Addr == "" {
		return r
	}
	line, next, err := s.forwardFrom(ctx, next, req, nil, true)
	if err != nil {
		return s.forwardFailed(next, err)
	}
	return line
}

// forwardDo carries out req at rt's node and returns its reply line (as
// forwarder.do, values taking a retrieval's VALUE blocks) and the route
// it took: rt's, or one its Reroute gave when rt's node could not be
// reached or refused req naming the partition's leader (each once at
// most: req is sent three times at most).
func (s *Server) forwardDo(ctx context.Context, rt Route, req []byte, values valueFunc) (string, Route, error) {
	return s.forwardFrom(ctx, rt, req, values, false)
}

// forwardFrom is forwardDo; refused says a refusal naming the leader was
// followed already (this node's own), so another is not.
func (s *Server) forwardFrom(ctx context.Context, rt Route, req []byte, values valueFunc, refused bool) (string, Route, error) {
	var unreachable bool
	for {
		line, err := s.forwardOnce(ctx, rt, req, values)
		if rt.Reroute == nil {
			return line, rt, err
		}
		var next Route
		ok := false
		switch {
		case err != nil && errors.Is(err, errNotSent) && !unreachable:
			unreachable = true
			next, ok = rt.Reroute(ctx, "")
		case err == nil && !refused:
			if l := refusalLeader(line); l != "" {
				refused = true
				next, ok = rt.Reroute(ctx, l)
			}
		}
		if !ok || next.Addr == "" {
			return line, rt, err
		}
		rt = next
	}
}

// forwardOnce is forwarder.do to rt's node, abandoned when rt.Gone
// closes first.
func (s *Server) forwardOnce(ctx context.Context, rt Route, req []byte, values valueFunc) (string, error) {
	if rt.Gone == nil {
		return s.fwd.do(ctx, rt.Addr, req, values)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-rt.Gone:
			cancel(errNodeGone)
		case <-ctx.Done():
		}
	}()
	line, err := s.fwd.do(ctx, rt.Addr, req, values)
	if err != nil && context.Cause(ctx) == errNodeGone && !errors.Is(err, errNotSent) {
		err = errNodeGone
	}
	return line, err
}

// errNodeGone is the error of a command abandoned because its node went
// down (Route.Gone).
var errNodeGone = errors.New("the node went down (its lease expired) while the command was in flight")

// refusalLeader returns the node a forwarded command's refusal line names
// as the partition's leader: a SERVER_ERROR saying "not my vbucket"
// (engine.ErrNotMyVBucket) and "led by node NAME" (the router's wording,
// and engine.NotMyVBucketError's, the replication's); "" for any other
// line, and for one saying that the write's outcome is unknown
// (engine.ErrAmbiguous), which is never sent again.
func refusalLeader(line string) string {
	const notMine, ledBy, unknown = "not my vbucket", "led by node ", "outcome is unknown"
	if !strings.HasPrefix(line, replyServerErrorSP) || !strings.Contains(line, notMine) || strings.Contains(line, unknown) {
		return ""
	}
	i := strings.Index(line, ledBy)
	if i < 0 {
		return ""
	}
	name := line[i+len(ledBy):]
	if end := strings.IndexFunc(name, notNodeRune); end >= 0 {
		name = name[:end]
	}
	return name
}

// notNodeRune says r cannot be part of a node's name as a refusal names
// it.
func notNodeRune(r rune) bool {
	return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.')
}

// nodeName says s can be a node's name as a refusal names it.
func nodeName(s string) bool {
	return s != "" && strings.IndexFunc(s, notNodeRune) < 0
}

// forwardFailed is the reply of a command that could not be forwarded. It
// says whether a write may have been applied: not when its node could not
// be reached (errNotSent: nothing was sent), perhaps otherwise.
func (s *Server) forwardFailed(rt Route, err error) string {
	s.log.Warn("memcache: forwarding a command to its partition's leader", "leader", rt.Node, "addr", rt.Addr, "err", err)
	outcome := "a write's outcome is unknown"
	if errors.Is(err, errNotSent) {
		outcome = replyNotApplied
	}
	return serverError(fmt.Errorf("%w: %w to node %s at %s: %w (%s)", engine.ErrTempFail, errForward, rt.Node, rt.Addr, err, outcome))
}

// replyNotApplied ends the reply of a command forwardFailed knows was not
// carried out: its client may send it again, whatever it was.
const replyNotApplied = "nothing was applied"

// forwardGet carries out a get-family command for key at rt's node:
// "gets" or "gats" (the CAS is asked for always; writeValue shows it when
// the client asked for it). A nil document is a miss; errLine is the
// leader's error reply, if it gave one.
func (s *Server) forwardGet(ctx context.Context, rt Route, key string, touch bool, exptime int64) (d *engine.Document, errLine string) {
	var req []byte
	if touch {
		req = append(append(append([]byte("gats "), strconv.FormatInt(exptime, 10)...), ' '), key...)
	} else {
		req = append([]byte("gets "), key...)
	}
	req = append(req, '\r', '\n')
	var v *fwdValue
	line, rt, err := s.forwardDo(ctx, rt, req, func(k string, got *fwdValue) error {
		if v != nil || k != key {
			return fmt.Errorf("an unexpected value of key %q for %q", k, key)
		}
		v = got
		return nil
	})
	switch {
	case err != nil:
		return nil, s.forwardFailed(rt, err)
	case line != replyEnd:
		return nil, line
	case v == nil:
		return nil, ""
	}
	return &engine.Document{Key: key, Value: v.value, Flags: v.flags, CAS: v.cas}, ""
}

// storageLine is a storage command's line and data block as sent to the
// leader (never noreply: the reply says when it is done).
func storageLine(cmd *command, key string, val []byte) []byte {
	b := make([]byte, 0, len(key)+len(val)+64)
	b = append(b, cmd.kind.String()...)
	b = append(b, ' ')
	b = append(b, key...)
	b = append(b, ' ')
	b = strconv.AppendUint(b, uint64(cmd.flags), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, cmd.exptime, 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(len(val)), 10)
	if cmd.kind == cmdCas {
		b = append(b, ' ')
		b = strconv.AppendUint(b, cmd.cas, 10)
	}
	b = append(b, '\r', '\n')
	b = append(b, val...)
	return append(b, '\r', '\n')
}

// keyLine is the line of touch, delete, incr or decr as sent to the
// leader.
func keyLine(kind cmdKind, key string, exptime int64, delta uint64) []byte {
	b := append(append([]byte(kind.String()), ' '), key...)
	switch kind {
	case cmdTouch:
		b = strconv.AppendInt(append(b, ' '), exptime, 10)
	case cmdIncr, cmdDecr:
		b = strconv.AppendUint(append(b, ' '), delta, 10)
	}
	return append(b, '\r', '\n')
}

// countForwarded counts a write or touch this node forwarded, answered
// reply (the leader's, or why it could not be carried out there), in this
// node's stats as one carried out here is counted: a storage command in
// cmd_set whatever its answer, and in total_items once stored; a cas in
// cas_hits, cas_misses or cas_badval; a touch in cmd_touch and touch_hits
// or touch_misses; a delete, incr or decr in its hits or misses. The
// leader does not count it again (session.ops).
func (s *Server) countForwarded(kind cmdKind, reply string) {
	st := &s.stats
	switch kind {
	case cmdSet, cmdAdd, cmdReplace, cmdAppend, cmdPrepend, cmdCas:
		st.cmdSet.Add(1)
		switch {
		case reply == replyStored:
			st.totalItems.Add(1)
			if kind == cmdCas {
				st.casHits.Add(1)
			}
		case kind == cmdCas && reply == replyNotFound:
			st.casMisses.Add(1)
		case kind == cmdCas && reply == replyExists:
			st.casBadval.Add(1)
		}
	case cmdTouch:
		st.cmdTouch.Add(1)
		countHit(reply, replyTouched, &st.touchHits, &st.touchMisses)
	case cmdDelete:
		countHit(reply, replyDeleted, &st.deleteHits, &st.deleteMisses)
	case cmdIncr, cmdDecr:
		hits, misses := &st.incrHits, &st.incrMisses
		if kind == cmdDecr {
			hits, misses = &st.decrHits, &st.decrMisses
		}
		hit := ""
		if reply != "" && strings.Trim(reply, "0123456789") == "" {
			hit = reply // the new value
		}
		countHit(reply, hit, hits, misses)
	}
}

// countHit counts reply in hits when it is hit (not ""), in misses when
// it is NOT_FOUND.
func countHit(reply, hit string, hits, misses *atomic.Int64) {
	switch {
	case hit != "" && reply == hit:
		hits.Add(1)
	case reply == replyNotFound:
		misses.Add(1)
	}
}

// countForwardedRead counts a key of a get (gat when touch) this node
// answered from the leader, found or not, as one answered here is
// counted: in cmd_get and get_hits or get_misses (cmd_touch and
// touch_hits or touch_misses for a gat).
func (s *Server) countForwardedRead(touch, found bool) {
	st := &s.stats
	cmd, hits, misses := &st.cmdGet, &st.getHits, &st.getMisses
	if touch {
		cmd, hits, misses = &st.cmdTouch, &st.touchHits, &st.touchMisses
	}
	cmd.Add(1)
	if found {
		hits.Add(1)
	} else {
		misses.Add(1)
	}
}
