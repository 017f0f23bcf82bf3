package replica

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"sync"
	"time"

	"github.com/mayflydb/mayfly/internal/clustertls"
	"github.com/mayflydb/mayfly/internal/netaddr"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// The transport's wire format. A connection carries messages one way, from
// the dialling node to the listening one; each node dials each of its
// peers once, so a pair of nodes shares two connections, whatever the
// number of groups. A connection opens with a hello, then carries frames:
//
//	hello:  "MFR1" | sender's NodeID (8 bytes, big endian)
//	frame:  length (4 bytes, of what follows) | group (8 bytes) | raftpb.Message
//
// The length's top bit (frames are at most maxFrame, far below it) marks a
// leader's quiesce heartbeat: a MsgHeartbeat after which the group goes
// quiet (Host.tickLoop). raft's own heartbeat Context is not free for
// it (raft reads it as a read-index acknowledgement).
// A sender writes every message queued for the peer (of all groups) into
// one buffered write per round.
const (
	helloMagic  = "MFR1"
	helloLen    = 4 + 8
	maxFrame    = 256 << 20 // a snapshot travels in one frame
	quiesceBit  = 1 << 31   // in a frame's length: a quiesce heartbeat
	dialTimeout = 2 * time.Second
	// resolveTimeout bounds a peer's address lookup, apart from the
	// dial's own dialTimeout: ClusterResolver's etcd read hangs while
	// this node's etcd member has no quorum (a node back from a network
	// partition, before its member rejoined), and then answers the
	// address it last saw, which must still be dialled.
	resolveTimeout = time.Second
	writeTimeout   = 10 * time.Second
	minBackoff     = 50 * time.Millisecond
	maxBackoff     = 2 * time.Second
	// kickGap is the least time between two pauses a peer's frames end
	// early (transport.redial).
	kickGap = time.Second
	// deadSocket is how long a cluster connection's sent data or
	// keepalive probes may go unacknowledged before the kernel fails it
	// (peerSocket); an idle connection is probed after 5 s, every 2 s
	// (peerKeepAlive).
	deadSocket = 10 * time.Second
)

// peerKeepAlive is the cluster port's TCP keepalive: an idle connection
// whose peer stopped answering (quiet groups send nothing) fails within
// about 11 s rather than TCP's two hours.
func peerKeepAlive() net.KeepAliveConfig {
	return net.KeepAliveConfig{Enable: true, Idle: 5 * time.Second, Interval: 2 * time.Second, Count: 3}
}

// outMsg is a message of a group, on its way to a peer.
type outMsg struct {
	g       GroupID
	m       *pb.Message
	quiesce bool // the leader's quiesce heartbeat
}

type transport struct {
	h      *Host
	ln     net.Listener
	server *tls.Config // nil: plain TCP

	mu      sync.Mutex
	peers   map[uint64]*peer
	inbound map[net.Conn]struct{}
	closed  bool
	wg      sync.WaitGroup
}

// listen starts the transport's listener, loopback only unless
// Options.AllowRemote or Options.TLS.
func listen(h *Host) (*transport, error) {
	if !h.opts.AllowRemote && h.opts.TLS == nil && !netaddr.IsLoopback(h.opts.Listen) {
		return nil, fmt.Errorf("%w: %s", ErrRemote, h.opts.Listen)
	}
	lc := net.ListenConfig{KeepAliveConfig: peerKeepAlive(), Control: peerSocket}
	ln, err := lc.Listen(h.ctx, "tcp", h.opts.Listen)
	if err != nil {
		return nil, fmt.Errorf("replica: listening on the cluster port: %w", err)
	}
	t := &transport{h: h, ln: ln, peers: map[uint64]*peer{}, inbound: map[net.Conn]struct{}{}}
	if h.opts.TLS != nil {
		t.server = h.opts.TLS.Clone()
		t.server.ClientAuth = tls.RequireAndVerifyClientCert
		t.server.MinVersion = tls.VersionTLS13
	}
	t.wg.Add(1)
	go t.accept()
	return t, nil
}

func (t *transport) accept() {
	defer t.wg.Done()
	for {
		c, err := t.ln.Accept()
		if err != nil {
			return // closed
		}
		t.mu.Lock()
		if t.closed {
			t.mu.Unlock()
			c.Close()
			return
		}
		t.inbound[c] = struct{}{}
		t.wg.Add(1)
		t.mu.Unlock()
		go t.receive(c)
	}
}

// isCut reports whether frames to and from nid are dropped (the tests'
// network partition, Options.test.cut).
func (h *Host) isCut(nid uint64) bool { return h.opts.test.cut != nil && h.opts.test.cut(nid) }

// receive reads one peer's connection, stepping each message into its
// group. A malformed stream closes the connection (the peer redials).
func (t *transport) receive(c net.Conn) {
	defer t.wg.Done()
	defer func() {
		t.mu.Lock()
		delete(t.inbound, c)
		t.mu.Unlock()
		c.Close()
	}()
	c.SetReadDeadline(time.Now().Add(writeTimeout)) // wall clock: a network deadline
	var conn net.Conn = c
	certName := "" // the node the peer's certificate names, under TLS
	if t.server != nil {
		tc, name, err := t.serverHandshake(c)
		if err != nil {
			t.h.opts.Logger.Warn("replica: refused a cluster connection", "from", c.RemoteAddr(), "err", err)
			return
		}
		conn, certName = tc, name
	}
	r := bufio.NewReaderSize(conn, 64<<10)
	var hello [helloLen]byte
	if _, err := io.ReadFull(r, hello[:]); err != nil || string(hello[:4]) != helloMagic {
		if err == nil && t.server == nil && hello[0] == tlsHandshakeRecord {
			t.h.opts.Logger.Warn("replica: refused a cluster connection: the peer speaks TLS and this node's cluster port does not (is the peer started with --cluster-tls and this node without?)",
				"from", c.RemoteAddr())
			return
		}
		t.h.opts.Logger.Debug("replica: refused a cluster connection", "from", c.RemoteAddr(), "err", err)
		return
	}
	c.SetReadDeadline(time.Time{})
	from := binary.BigEndian.Uint64(hello[4:])
	if t.server != nil && NodeID(certName) != from {
		t.h.opts.Logger.Warn("replica: refused a cluster connection", "from", c.RemoteAddr(),
			"err", fmt.Errorf("%w: a certificate of %s speaks for node ID %d", ErrPeerCert, certName, from))
		return
	}
	in := &inbox{ready: make(chan struct{}, 1), room: make(chan struct{}, 1), done: make(chan struct{})}
	defer close(in.done)
	t.wg.Add(1)
	go t.stepFrames(in)
	for {
		f, err := readFrame(r)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				t.h.opts.Logger.Warn("replica: bad frame; connection closed", "from", c.RemoteAddr(), "err", err)
			}
			// The peer may be gone (a killed process's connections
			// end): its groups must not stay quiet waiting for it.
			if t.h.ctx.Err() == nil {
				t.h.peerDown(from)
			}
			return
		}
		if f.m.GetTo() != t.h.self || f.m.GetFrom() != from {
			continue // not for this node, or not from the node that said hello
		}
		if t.h.isCut(from) {
			continue
		}
		if t.h.peerUp(from) {
			t.redial(from) // the link works: this node's answers go now
		}
		if !t.deliver(in, f) {
			return // closing
		}
	}
}

// inbox is what one inbound connection read and its stepper
// (transport.stepFrames) has not stepped yet: the reader drains the
// socket as fast as frames arrive, so that a node too busy to step them
// at that pace keeps its backlog here, where a group's newer heartbeat
// or response replaces the older one and the other messages are stepped
// first (frameQueue), rather than in the kernel's socket buffers, in
// arrival order, where a vote waited behind seconds of stale heartbeats.
type inbox struct {
	mu    sync.Mutex
	q     frameQueue
	ready chan struct{} // capacity 1: frames to step
	room  chan struct{} // capacity 1: the stepper took the frames queued
	done  chan struct{} // closed when the connection's reader returns
}

// deliver queues f for the stepper. Heartbeats and responses are
// superseded, so they are bounded by the groups; other messages wait
// while Options.SendQueue of them are queued (TCP's backpressure then
// holds the peer back, as before there was an inbox). It returns false
// when the Host closes.
func (t *transport) deliver(in *inbox, f outMsg) bool {
	in.mu.Lock()
	for !isBeat(f) && len(in.q.urgent) >= t.h.opts.SendQueue {
		in.mu.Unlock()
		select {
		case <-in.room:
		case <-t.h.ctx.Done():
			return false
		}
		in.mu.Lock()
	}
	if in.q.push(f, math.MaxInt) == pushSuperseded {
		t.h.superseded.Add(1)
	}
	in.mu.Unlock()
	select {
	case in.ready <- struct{}{}:
	default:
	}
	return true
}

// stepFrames steps the frames of one inbound connection into their
// groups, those that are not heartbeats or responses first, until the
// connection's reader returns.
func (t *transport) stepFrames(in *inbox) {
	defer t.wg.Done()
	for {
		select {
		case <-in.done:
			return
		case <-in.ready:
		}
		in.mu.Lock()
		fs := in.q.take()
		in.mu.Unlock()
		select {
		case in.room <- struct{}{}:
		default:
		}
		if hook := t.h.opts.test.beforeStep; hook != nil {
			hook(len(fs))
		}
		for _, f := range fs {
			t.h.step(f)
		}
	}
}

// send queues msgs (all to node to) on that peer's connection.
func (t *transport) send(to uint64, msgs []outMsg) {
	if t.h.isCut(to) {
		return
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	p := t.peers[to]
	if p == nil {
		p = &peer{t: t, id: to, wake: make(chan struct{}, 1), kick: make(chan struct{}, 1)}
		t.peers[to] = p
		t.wg.Add(1)
		go p.run()
	}
	t.mu.Unlock()
	var lost []outMsg
	var queued, superseded, dropped uint64
	p.mu.Lock()
	for _, m := range msgs {
		switch p.q.push(m, t.h.opts.SendQueue) {
		case pushQueued:
			queued++
		case pushSuperseded:
			queued++
			superseded++
		case pushEvicted:
			queued++
			dropped++
		case pushDropped:
			dropped++
			lost = append(lost, m)
		}
	}
	p.mu.Unlock()
	t.h.sent.Add(queued)
	t.h.superseded.Add(superseded)
	t.h.dropped.Add(dropped)
	for _, m := range lost {
		t.h.unreachable(m.g, to, m.m.GetType() == pb.MsgSnap)
	}
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// redial ends the wait of node to's sender after a failed dial, if it
// waits: a frame came from that node, so the link works again, and the
// node is to hear this one's answers now, not after the backoff.
func (t *transport) redial(to uint64) {
	t.mu.Lock()
	p := t.peers[to]
	t.mu.Unlock()
	if p == nil {
		return
	}
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// close stops listening and closes every connection; the senders stop.
func (t *transport) close() {
	t.mu.Lock()
	t.closed = true
	for c := range t.inbound {
		c.Close()
	}
	t.mu.Unlock()
	t.ln.Close()
	t.wg.Wait()
}

// peer is the sending side of one peer's connection.
type peer struct {
	t    *transport
	id   uint64
	mu   sync.Mutex
	q    frameQueue
	wake chan struct{}
	kick chan struct{} // capacity 1: redial now (transport.redial)
}

func (p *peer) run() {
	defer p.t.wg.Done()
	h := p.t.h
	var conn net.Conn
	var w *bufio.Writer
	backoff := minBackoff
	var lastKick time.Time // when a kick last ended a pause
	warned := ""           // the last handshake failure logged
	// An outage of the link, for the log: when the first dial failed
	// (zero while connected or never tried), and how many failed.
	var outage time.Time
	dials := 0
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-p.wake:
		}
		p.mu.Lock()
		msgs := p.q.take()
		p.mu.Unlock()
		if len(msgs) == 0 {
			continue
		}
		if conn == nil {
			c, err := p.dial()
			if err != nil {
				if errors.Is(err, errHandshake) && err.Error() != warned {
					warned = err.Error() // once, not every backoff
					h.opts.Logger.Warn("replica: peer refused", "peer", h.name(p.id), "err", err)
				}
				if outage.IsZero() {
					outage = time.Now() // wall clock: an outage's length, for the log
					h.opts.Logger.Info("replica: a peer is unreachable; redialling", "peer", h.name(p.id), "err", err)
				} else {
					h.opts.Logger.Debug("replica: peer unreachable", "peer", h.name(p.id), "err", err)
				}
				dials++
				p.fail(msgs)
				pause := backoff
				if h.opts.test.backoff > 0 {
					pause = h.opts.test.backoff
				}
				// The backoff grows with every failed dial, kicked or not:
				// a peer whose frames arrive while dials to it fail (a
				// firewall refusing only inbound connections to it) is
				// redialled at most once a kickGap, not at its frame rate.
				backoff = min(2*backoff, maxBackoff)
				switch p.pause(pause, lastKick) {
				case pauseClosed:
					return
				case pauseKicked:
					lastKick = time.Now() // wall clock: the gap to the next kick that may end a pause
				}
				// Messages queued meanwhile are sent (or failed) next.
				select {
				case p.wake <- struct{}{}:
				default:
				}
				continue
			}
			conn, w, backoff, warned = c, bufio.NewWriterSize(c, 64<<10), minBackoff, ""
			if !outage.IsZero() {
				h.opts.Logger.Info("replica: connected to a peer again", "peer", h.name(p.id),
					"after", time.Since(outage).Round(time.Millisecond), "failed_dials", dials) // wall clock: for the log
				outage, dials = time.Time{}, 0
			}
		}
		if f := h.opts.test.beforeWrite; f != nil {
			f(len(msgs))
		}
		if err := p.write(conn, w, msgs); err != nil {
			h.opts.Logger.Info("replica: lost the connection to a peer", "peer", h.name(p.id), "err", err)
			outage = time.Now() // wall clock: an outage's length, for the log
			conn.Close()
			conn = nil
			p.fail(msgs)
			continue
		}
		for _, m := range msgs {
			if m.m.GetType() == pb.MsgSnap {
				h.snapshotSent(m.g, p.id)
			}
		}
	}
}

func (p *peer) dial() (net.Conn, error) {
	h := p.t.h
	name := h.name(p.id)
	rctx, rcancel := context.WithTimeout(h.ctx, resolveTimeout)
	addr, err := h.opts.Resolver.Addr(rctx, name)
	rcancel()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(h.ctx, dialTimeout)
	defer cancel()
	d := net.Dialer{KeepAliveConfig: peerKeepAlive(), Control: peerSocket}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if h.opts.TLS != nil {
		if c, err = clientHandshake(ctx, c, h.opts.TLS, addr, name); err != nil {
			return nil, err
		}
	}
	hello := binary.BigEndian.AppendUint64([]byte(helloMagic), h.self)
	c.SetWriteDeadline(time.Now().Add(writeTimeout)) // wall clock: a network deadline
	if _, err := c.Write(hello); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// tlsHandshakeRecord is the first byte of a TLS connection (a handshake
// record): what a plain cluster port sees of a TLS peer's hello.
const tlsHandshakeRecord = 0x16

// errHandshake marks a dial that failed in its TLS handshake: a peer
// whose certificate does not pass, or a peer without TLS. Its messages
// are warnings (a plain dial's failures are the ordinary peer down).
var errHandshake = errors.New("replica: TLS handshake with a peer")

// serverHandshake runs the TLS handshake of an accepted connection (the
// client's certificate verified against the cluster's CA) and returns the
// node the certificate names.
func (t *transport) serverHandshake(c net.Conn) (*tls.Conn, string, error) {
	ctx, cancel := context.WithTimeout(t.h.ctx, writeTimeout)
	defer cancel()
	tc := tls.Server(c, t.server)
	if err := tc.HandshakeContext(ctx); err != nil {
		if _, ok := errors.AsType[tls.RecordHeaderError](err); ok {
			return nil, "", fmt.Errorf("%w: the peer does not speak TLS and this node's cluster port does (is the peer started without --cluster-tls?): %w", errHandshake, err)
		}
		return nil, "", fmt.Errorf("%w: %w", errHandshake, err)
	}
	name, err := clustertls.NodeName(tc.ConnectionState().PeerCertificates[0])
	if err != nil {
		return nil, "", fmt.Errorf("%w: %w", ErrPeerCert, err)
	}
	return tc, name, nil
}

// clientHandshake runs the TLS handshake of a connection dialled to node
// name at addr: the server's certificate must chain to the cluster's CA,
// be good for addr's host, and name node name. It closes c on failure.
func clientHandshake(ctx context.Context, c net.Conn, base *tls.Config, addr, name string) (net.Conn, error) {
	cfg := base.Clone()
	cfg.MinVersion = tls.VersionTLS13
	if host, _, err := net.SplitHostPort(addr); err == nil {
		cfg.ServerName = host
	}
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		got, err := clustertls.NodeName(cs.PeerCertificates[0])
		if err != nil {
			return fmt.Errorf("%w: %w", ErrPeerCert, err)
		}
		if got != name {
			return fmt.Errorf("%w: %s at %s answers with %s's certificate", ErrPeerCert, name, addr, got)
		}
		return nil
	}
	tc := tls.Client(c, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("%w %s at %s (does it run with the same --cluster-tls CA?): %w", errHandshake, name, addr, err)
	}
	return tc, nil
}

// write sends msgs in one buffered write.
func (p *peer) write(c net.Conn, w *bufio.Writer, msgs []outMsg) error {
	c.SetWriteDeadline(time.Now().Add(writeTimeout)) // wall clock: a network deadline
	for _, m := range msgs {
		if err := writeFrame(w, m); err != nil {
			return err
		}
	}
	return w.Flush()
}

// errFrame is a frame that cannot be read: a bad length or an
// undecodable message.
var errFrame = errors.New("replica: bad frame")

// writeFrame writes one frame: length (and quiesce bit), group, message.
func writeFrame(w io.Writer, f outMsg) error {
	b, err := proto.Marshal(f.m)
	if err != nil {
		return err
	}
	if len(b)+8 > maxFrame {
		return fmt.Errorf("%w: a message of %d bytes", errFrame, len(b))
	}
	n := uint32(len(b) + 8)
	if f.quiesce {
		n |= quiesceBit
	}
	var head [4 + 8]byte
	binary.BigEndian.PutUint32(head[:4], n)
	binary.BigEndian.PutUint64(head[4:], uint64(f.g))
	if _, err := w.Write(head[:]); err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// readFrame reads one frame. The body is read as it arrives, so a length
// claimed but not sent costs no allocation of that size.
func readFrame(r io.Reader) (outMsg, error) {
	var head [4 + 8]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return outMsg{}, err
	}
	n := binary.BigEndian.Uint32(head[:4])
	quiesce := n&quiesceBit != 0
	n &^= quiesceBit
	if n < 8 || n > maxFrame {
		return outMsg{}, fmt.Errorf("%w: length %d", errFrame, n)
	}
	g := GroupID(binary.BigEndian.Uint64(head[4:]))
	buf, err := io.ReadAll(io.LimitReader(r, int64(n-8)))
	if err != nil {
		return outMsg{}, err
	}
	if len(buf) != int(n-8) {
		return outMsg{}, io.ErrUnexpectedEOF
	}
	m := &pb.Message{}
	if err := proto.Unmarshal(buf, m); err != nil {
		return outMsg{}, fmt.Errorf("%w: %w", errFrame, err)
	}
	if quiesce && m.GetType() != pb.MsgHeartbeat {
		return outMsg{}, fmt.Errorf("%w: a quiesce mark on a %v", errFrame, m.GetType())
	}
	return outMsg{g: g, m: m, quiesce: quiesce}, nil
}

// fail reports msgs lost to raft (it retries through its own timers),
// and wakes every quiet group of the peer.
func (p *peer) fail(msgs []outMsg) {
	p.t.h.peerDown(p.id)
	seen := map[GroupID]bool{}
	for _, m := range msgs {
		snap := m.m.GetType() == pb.MsgSnap
		if seen[m.g] && !snap {
			continue
		}
		seen[m.g] = true
		p.t.h.unreachable(m.g, p.id, snap)
	}
}

// How a sender's pause after a failed dial ended.
const (
	pauseElapsed = iota
	pauseKicked  // transport.redial: the peer was heard from
	pauseClosed  // the Host is closing
)

// pause waits d after a failed dial, or less when the peer is heard from
// meanwhile (a kick) or the Host closes. A kick ends the wait at once if
// the last kick to end one (lastKick) was at least kickGap ago, or else
// kickGap after it (if that comes before d).
func (p *peer) pause(d time.Duration, lastKick time.Time) int {
	t := time.NewTimer(d)
	defer t.Stop()
	deadline := time.Now().Add(d) // wall clock: when the pause ends, against a kick's gap
	kick, kicked := p.kick, false
	for {
		select {
		case <-p.t.h.ctx.Done():
			return pauseClosed
		case <-kick:
			kick = nil // one kick is enough
			at := lastKick.Add(kickGap)
			wait := time.Until(at)
			if wait <= 0 {
				return pauseKicked
			}
			if at.Before(deadline) {
				t.Reset(wait)
				kicked = true
			}
		case <-t.C:
			if kicked {
				return pauseKicked
			}
			return pauseElapsed
		}
	}
}
