//go:build linux

package memcache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/mayflydb/mayfly/engine"
)

// DefaultIO is Options.IO's default: event loops on Linux, where they cost
// the server 14-22% less CPU per command than a goroutine per connection,
// a get about what memcached's costs (BENCHMARKS.md, "The memcached port
// on event loops").
const DefaultIO = IOEventLoop

// eventLoopSupported says whether IOEventLoop can be chosen.
const eventLoopSupported = true

// Event loops.
//
// Each loop owns an epoll instance (level-triggered), an eventfd other
// goroutines wake it with, and the connections handed to it. A connection's
// socket is a duplicate of the accepted one's, non-blocking, outside Go's
// netpoller. When a socket is readable the loop reads once into the
// connection's buffer, runs every complete command in it (line and data
// block), and writes the answers of the batch at once; what the socket does
// not take waits for EPOLLOUT. Reads, stats and writes that acknowledge from
// memory run on the loop. A write that waits for the disk goes on the
// connection's engine.Pipeline, as the goroutine driver's pipelined writes
// do (they share group commits), and its reply takes its place in the
// connection's output when the pipeline's goroutine posts it back; a
// command that must see the writes before it (a read after them) waits
// until they are done, and so do the connection's later commands. Anything
// else that blocks (flush_all, a gat at a durable level) runs on a
// goroutine of its own while the connection waits, and so does any command
// that needs the disk: the loop runs every command from memory alone
// (engine's GetResident, WriteOptions.Resident), and one whose answer or
// write needs the store (a value ejected from memory, fullEviction's item
// out of memory whole) says so rather than read it, and is handed off, a
// multi-get from that key on; its replies are bounded as the connection's
// output is, and it goes on once they are sent. Other connections go on
// meanwhile. A get that finds its document expired does not wait for the
// deletion's commit.

// Loop tuning.
const (
	// readChunk is the least free room a connection's input buffer has
	// before a read (memcached's READ_BUFFER_SIZE).
	readChunk = bufSize
	// maxKeptIn and maxKeptOut are the largest buffers an idle connection
	// keeps.
	maxKeptIn  = 64 << 10
	maxKeptOut = 64 << 10
	// inHigh is how much unprocessed input a connection may hold, beyond
	// what its next command needs, before the loop stops reading it.
	inHigh = 64 << 10
	// outHigh is how much unsent output stops a connection's commands until
	// the client reads some.
	outHigh = 1 << 20
	// loopWindow and loopMaxBytes bound a connection's pipelined writes
	// in flight: half the pipeline's own bounds, so that Pipeline.Go, which
	// waits when they are full, never waits on the loop.
	loopWindow   = pipeWindow / 2
	loopMaxBytes = pipeMaxBytes / 2
	// maxEvents is how many events one epoll_wait returns at most.
	maxEvents = 256
)

// eventLoops are a server's loops; a new connection goes to the next in
// turn.
type eventLoops struct {
	loops []*loop
	next  atomic.Uint32
}

// startEventLoops starts one loop per GOMAXPROCS.
func (s *Server) startEventLoops() (*eventLoops, error) {
	n := runtime.GOMAXPROCS(0)
	e := &eventLoops{}
	for range n {
		l, err := newLoop(s)
		if err != nil {
			e.stop()
			return nil, err
		}
		e.loops = append(e.loops, l)
	}
	for _, l := range e.loops {
		s.wg.Add(1)
		go l.run()
	}
	return e, nil
}

// add hands nc to a loop, which serves it under ctx and calls done once it
// is closed and every write it began has ended. It reports false, nc
// untouched, when nc cannot be served by a loop (not a socket).
func (e *eventLoops) add(ctx context.Context, nc net.Conn, done func()) bool {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	fd := -1
	if cerr := raw.Control(func(s uintptr) {
		fd, err = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0)
	}); cerr != nil || err != nil {
		return false
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return false
	}
	l := e.loops[int(e.next.Add(1))%len(e.loops)]
	c := &econn{l: l, fd: fd, ctx: ctx, done: done, idleSince: time.Now()} // wall clock: connection timeouts
	c.session = session{s: l.s, w: c, drv: c, remote: nc.RemoteAddr()}
	c.refs.Store(1)
	nc.Close() // the duplicate keeps the socket open
	if !l.post(loopMsg{kind: msgAdd, c: c}) {
		c.closeFD()
		c.release()
	}
	return true
}

// sweep asks every loop to close the connections whose context is done.
func (e *eventLoops) sweep() {
	for _, l := range e.loops {
		l.post(loopMsg{kind: msgSweep})
	}
}

// stop asks every loop to close its connections and end.
func (e *eventLoops) stop() {
	for _, l := range e.loops {
		l.post(loopMsg{kind: msgStop})
	}
}

// loopMsg is what other goroutines tell a loop.
type loopMsg struct {
	kind msgKind
	c    *econn
	pr   *loopReply // msgDone: the pipelined write that finished
	h    *handoff   // msgHandoff: the handed-off command that finished
}

type msgKind uint8

const (
	msgAdd     msgKind = iota // serve c
	msgDone                   // a pipelined write of c finished
	msgHandoff                // c's handed-off command finished
	msgSweep                  // close the connections whose context is done
	msgStop                   // close every connection and end
)

// loop is one event loop.
type loop struct {
	s    *Server
	epfd int
	// wait is epfd as Go's netpoller sees it: the loop parks there, as a
	// goroutine, when its epoll set has nothing ready, instead of holding
	// a thread in epoll_wait (a thread blocked in a syscall has the
	// runtime's monitor hand its P over and poll every 20 µs).
	wait    *os.File
	waitRaw syscall.RawConn
	evfd    int
	conns   map[int32]*econn // by socket; the loop's goroutine only
	dirty   []*econn         // connections to serve after the messages at hand
	now     time.Time        // wall clock at the last wake-up

	mu       sync.Mutex
	inbox    []loopMsg // guarded by mu
	signaled bool      // guarded by mu: the eventfd has been written since the loop last looked
	stopped  bool      // guarded by mu: the loop is gone (its fds closed)
}

func newLoop(s *Server) (*loop, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("memcache: epoll_create1: %w", err)
	}
	if err := unix.SetNonblock(epfd, true); err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("memcache: epoll fd: %w", err)
	}
	// A non-blocking fd given to os.NewFile goes into the netpoller.
	wait := os.NewFile(uintptr(epfd), "memcache-epoll")
	waitRaw, err := wait.SyscallConn()
	if err == nil {
		err = wait.SetReadDeadline(time.Time{}) // fails unless it is in the netpoller
	}
	if err != nil {
		wait.Close()
		return nil, fmt.Errorf("memcache: epoll fd in the netpoller: %w", err)
	}
	evfd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		wait.Close()
		return nil, fmt.Errorf("memcache: eventfd: %w", err)
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(evfd)}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, evfd, &ev); err != nil {
		unix.Close(evfd)
		wait.Close()
		return nil, fmt.Errorf("memcache: epoll_ctl: %w", err)
	}
	return &loop{s: s, epfd: epfd, wait: wait, waitRaw: waitRaw, evfd: evfd, conns: make(map[int32]*econn)}, nil
}

// post gives the loop a message and wakes it; false when the loop is gone.
func (l *loop) post(m loopMsg) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return false
	}
	l.inbox = append(l.inbox, m)
	if !l.signaled {
		l.signaled = true
		// Under mu: the loop closes the eventfd only after stopped is set.
		one := [8]byte{1}
		unix.Write(l.evfd, one[:])
	}
	return true
}

// tick is how often the loop looks for connections past a timeout; -1 when
// there are no timeouts.
func (l *loop) tick() int {
	o := &l.s.opts
	d := time.Duration(-1)
	for _, t := range [...]time.Duration{o.IdleTimeout, o.CommandTimeout} {
		if t > 0 && (d < 0 || t < d) {
			d = t
		}
	}
	if d < 0 {
		return -1
	}
	return int(min(max(d/4, 10*time.Millisecond), time.Second) / time.Millisecond)
}

// run is the loop's goroutine.
func (l *loop) run() {
	defer l.s.wg.Done()
	events := make([]unix.EpollEvent, maxEvents)
	var msgs []loopMsg
	timeout := l.tick()
	lastSweep := time.Now() // wall clock: connection timeouts
	for {
		if timeout > 0 {
			l.wait.SetReadDeadline(lastSweep.Add(time.Duration(timeout) * time.Millisecond))
		}
		var n int
		var werr error
		err := l.waitRaw.Read(func(fd uintptr) bool {
			n, werr = pollNow(int(fd), events)
			return n > 0 || (werr != nil && werr != unix.EINTR) // else park until ready
		})
		if err == nil {
			err = werr
		}
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) && !errors.Is(err, unix.EINTR) {
			l.s.log.Error("memcache: epoll_wait", "err", err)
			l.shutdown()
			return
		}
		n = max(n, 0)
		l.now = time.Now() // wall clock: connection timeouts
		woken := false
		for i := range n {
			ev := &events[i]
			if ev.Fd == int32(l.evfd) {
				woken = true
				continue
			}
			if c := l.conns[ev.Fd]; c != nil {
				l.guard(c, func() { c.ready(ev.Events) })
			}
		}
		if woken {
			var b [8]byte
			unix.Read(l.evfd, b[:])
			l.mu.Lock()
			msgs, l.inbox = l.inbox, msgs[:0]
			l.signaled = false
			l.mu.Unlock()
			for i := range msgs {
				if l.handle(&msgs[i]) {
					l.shutdown()
					return
				}
				msgs[i] = loopMsg{}
			}
			// The connections whose writes finished go on once each,
			// however many of their writes one commit finished: one
			// write of their answers, not one per write.
			for i, c := range l.dirty {
				c.dirty = false
				l.guard(c, c.serve)
				l.dirty[i] = nil
			}
			l.dirty = l.dirty[:0]
		}
		if timeout > 0 && l.now.Sub(lastSweep) >= time.Duration(timeout)*time.Millisecond {
			lastSweep = l.now
			l.timeouts()
		}
	}
}

// handle acts on one message; it reports whether the loop is to stop.
func (l *loop) handle(m *loopMsg) bool {
	switch m.kind {
	case msgAdd:
		c := m.c
		if c.ctx.Err() != nil {
			c.closeFD()
			c.release()
			return false
		}
		c.events = unix.EPOLLIN
		ev := unix.EpollEvent{Events: c.events, Fd: int32(c.fd)}
		if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, c.fd, &ev); err != nil {
			l.s.log.Warn("memcache: epoll_ctl add", "remote", c.remote, "err", err)
			c.closeFD()
			c.release()
			return false
		}
		l.conns[int32(c.fd)] = c
	case msgDone:
		c := m.pr.c
		l.guard(c, func() { c.writeDone(m.pr) })
	case msgHandoff:
		c := m.h.c
		l.guard(c, func() { c.handoffDone(m.h) })
	case msgSweep:
		for _, c := range l.conns {
			if c.ctx.Err() != nil {
				c.close()
			}
		}
	case msgStop:
		return true
	}
	return false
}

// guard runs f on c: a panic closes c, not the server (as the goroutine
// driver).
func (l *loop) guard(c *econn, f func()) {
	defer func() {
		if r := recover(); r != nil {
			l.s.log.Error("memcache: panic serving connection", "remote", c.remote, "panic", r, "stack", string(debug.Stack()))
			c.close()
		}
	}()
	if !c.closed {
		f()
	}
}

// timeouts closes the connections idle or stalled mid-command too long.
func (l *loop) timeouts() {
	o := &l.s.opts
	for _, c := range l.conns {
		if c.busy || c.inflight > 0 || c.eof {
			continue // waiting on the server, not on the client
		}
		switch {
		case c.partial():
			if o.CommandTimeout <= 0 || c.cmdStart.IsZero() || l.now.Sub(c.cmdStart) < o.CommandTimeout {
				continue
			}
		case o.IdleTimeout <= 0 || l.now.Sub(c.idleSince) < o.IdleTimeout:
			continue
		}
		l.s.stats.idleKicks.Add(1)
		l.s.log.Debug("memcache: closing idle or stalled connection", "remote", c.remote, "partial", c.partial())
		c.close()
	}
}

// shutdown closes every connection and the loop's own fds.
func (l *loop) shutdown() {
	for _, c := range l.conns {
		c.close()
	}
	l.mu.Lock()
	l.stopped = true
	msgs := l.inbox
	l.inbox = nil
	unix.Close(l.evfd)
	l.wait.Close() // and the epoll fd
	l.mu.Unlock()
	for _, m := range msgs {
		if m.kind == msgAdd { // never served: close it
			m.c.closeFD()
			m.c.release()
		}
	}
}

// econn is a connection served by a loop. Its fields belong to the loop's
// goroutine, but for refs.
type econn struct {
	session
	l    *loop
	fd   int
	ctx  context.Context // the Serve call's: done closes the connection
	done func()          // called once the connection is closed and its writes ended
	// refs counts the holds on the connection: the loop's until it is
	// closed, a handed-off command's, the pipeline's writes after the close.
	refs atomic.Int32

	in   []byte // input; in[rpos:] is not yet consumed
	rpos int
	// need is how many bytes of in[rpos:] the next command needs before it
	// can run (its line and data block), 0 when not known.
	need    int
	swallow int // input bytes still to discard (a refused data block)
	out     []byte
	wpos    int          // out[wpos:] is not yet sent
	pending []*loopReply // replies of pipelined writes not yet in out, in order
	// afterBytes counts the replies held behind pending ones (their
	// after): answers waiting for a commit, bounded with out (unsent).
	afterBytes int

	pipe     *engine.Pipeline
	inflight int // pipelined writes not yet finished, noreply ones too
	inBytes  int // their values' bytes
	busy     bool
	dirty    bool // in l.dirty

	events    uint32 // the epoll interest registered
	eof       bool   // the client sent all it will send
	deaf      bool   // the client cannot be answered: output is dropped
	unwatched bool   // the socket is out of the epoll set
	closing   bool   // close once out is sent
	spoke     bool   // a first byte was read: a binary client's would have been refused
	closed    bool
	cmdStart  time.Time // when a command was first seen unfinished
	idleSince time.Time // when the connection last became idle

	// held is the command at the head of the input, parsed once, and
	// heldLen the length of its line: a multi-get resumed from getNext
	// (each time its unsent answers drop below outHigh) goes on with it
	// rather than scanning and tokenizing its line again, which would
	// cost the square of the line. Valid while getNext > 0.
	held    command
	heldLen int
}

// loopReply is a pipelined write's reply, in the connection's output
// order.
type loopReply struct {
	c       *econn
	reply   string // set by the pipeline's goroutine before it posts msgDone
	noreply bool
	size    int
	done    bool   // the loop has seen msgDone
	after   []byte // the replies written after this one, before the next pending
}

// handoff is a command run on a goroutine of its own.
type handoff struct {
	c   *econn
	out outcome
	buf []byte // its replies
	// size is the command's length in the input (line and data block),
	// consumed once it is done; getNext is where a multi-get whose
	// replies filled buf (handoffDriver.full) goes on.
	size    int
	getNext int
	ahead   []aheadAnswer // the multi-get's answers fetched ahead, with getNext
	valued  bool          // a VALUE block of the multi-get was written, with getNext
}

// Write, WriteString and WriteByte make econn the session's replyWriter: a
// reply goes to out, or after the last pending reply of a pipelined write.
func (c *econn) Write(p []byte) (int, error) {
	if c.deaf {
		return len(p), nil // no one to answer
	}
	if n := len(c.pending); n > 0 {
		c.pending[n-1].after = append(c.pending[n-1].after, p...)
		c.afterBytes += len(p)
	} else {
		c.out = append(c.out, p...)
	}
	return len(p), nil
}

func (c *econn) WriteString(s string) (int, error) {
	if c.deaf {
		return len(s), nil // no one to answer
	}
	if n := len(c.pending); n > 0 {
		c.pending[n-1].after = append(c.pending[n-1].after, s...)
		c.afterBytes += len(s)
	} else {
		c.out = append(c.out, s...)
	}
	return len(s), nil
}

func (c *econn) WriteByte(b byte) error {
	if c.deaf {
		return nil // no one to answer
	}
	if n := len(c.pending); n > 0 {
		c.pending[n-1].after = append(c.pending[n-1].after, b)
		c.afterBytes++
	} else {
		c.out = append(c.out, b)
	}
	return nil
}

// async: a write goes on the pipeline when it would wait for the disk (or
// for its replication), or to keep its order behind writes in flight.
func (c *econn) async(noreply bool) bool {
	return c.inflight > 0 || c.s.writesWaitNow()
}

// submit runs a write on the connection's pipeline; the pipeline's
// goroutine posts its reply back to the loop.
func (c *econn) submit(ctx context.Context, key string, size int, noreply bool, fn func(ctx context.Context) string) {
	if c.pipe == nil {
		c.pipe = engine.NewPipeline(c.ctx, &engine.PipelineOptions{Window: pipeWindow, MaxBytes: pipeMaxBytes})
	}
	pr := &loopReply{c: c, noreply: noreply, size: size}
	c.inflight++
	c.inBytes += size
	if !noreply {
		c.pending = append(c.pending, pr)
	}
	l := c.l
	c.pipe.Go(key, size, func(ctx context.Context) {
		pr.reply = fn(ctx)
		l.post(loopMsg{kind: msgDone, pr: pr})
	})
}

// unsent is the size of the answers not yet sent: those in out and those
// held behind a pipelined write's (a commit's) reply.
func (c *econn) unsent() int { return len(c.out) - c.wpos + c.afterBytes }

// full: the unsent answers have reached outHigh.
func (c *econn) full() bool { return c.unsent() >= outHigh }

// mayBlock: no, the loop serves other connections; a read that needs the
// disk is handed off (outcome.block).
func (c *econn) mayBlock() bool { return false }

// settled: no pipelined write in flight.
func (c *econn) settled() bool { return c.inflight == 0 }

// partial reports whether part of a command has arrived.
func (c *econn) partial() bool { return c.swallow > 0 || c.rpos < len(c.in) }

// ready handles the socket's epoll events.
func (c *econn) ready(events uint32) {
	if events&(unix.EPOLLIN|unix.EPOLLHUP|unix.EPOLLERR) != 0 && !c.eof {
		c.read()
	}
	if events&(unix.EPOLLHUP|unix.EPOLLERR) != 0 && c.eof {
		// The client is gone both ways: nothing more comes, nothing sent
		// arrives. The commands that arrived whole still run (a stream of
		// noreply sets is not lost), their answers dropped, but for reads:
		// a multi-get under way stops, a get or gets is not run (process);
		// the socket leaves the epoll set, which would report the hang-up
		// again and again.
		c.deaf = true
		c.unwatch()
	}
	c.serve()
}

// unwatch takes the socket out of the epoll set.
func (c *econn) unwatch() {
	if c.unwatched {
		return
	}
	c.unwatched = true
	unix.EpollCtl(c.l.epfd, unix.EPOLL_CTL_DEL, c.fd, nil)
}

// read reads once from the socket into in.
func (c *econn) read() {
	if c.rpos == len(c.in) {
		c.in, c.rpos = c.in[:0], 0
		if cap(c.in) > maxKeptIn {
			c.in = nil
		}
	}
	want := max(readChunk, c.need-(len(c.in)-c.rpos))
	if cap(c.in)-len(c.in) < want {
		rest := len(c.in) - c.rpos
		if c.rpos > 0 && cap(c.in)-rest >= want {
			copy(c.in, c.in[c.rpos:])
		} else {
			grown := make([]byte, rest, rest+want)
			copy(grown, c.in[c.rpos:])
			c.in = grown
		}
		c.in, c.rpos = c.in[:rest], 0
	}
	for {
		n, err := rawRead(c.fd, c.in[len(c.in):cap(c.in)])
		switch {
		case n > 0:
			c.in = c.in[:len(c.in)+n]
			c.s.stats.bytesRead.Add(int64(n))
			return
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return
		}
		c.eof = true // 0: the client shut its side; or an error
		return
	}
}

// serve runs what can run, sends what can go, and sets the interest.
func (c *econn) serve() {
	sent := false
	for {
		starved := c.process()
		if c.closed {
			return
		}
		if c.eof && starved && !c.busy && c.inflight == 0 {
			c.closing = true // every command that arrived whole has run
		}
		sent = c.flush() || sent
		if c.closing && !c.busy && c.inflight == 0 && c.wpos == len(c.out) {
			c.close()
			return
		}
		if starved || c.closed || c.closing || c.busy || c.inflight > 0 || c.full() {
			break // until more input, a write's or handoff's end, or EPOLLOUT
		}
		// The answers that held the commands back went out: run on.
	}
	if c.partial() {
		// A multi-get held back by its unsent answer (getNext) waits for
		// the client to read, not to send: its time runs from the last
		// bytes the client took.
		if c.cmdStart.IsZero() || (sent && c.getNext > 0) {
			c.cmdStart = c.l.now
		}
	} else {
		c.cmdStart = time.Time{}
		c.idleSince = c.l.now
	}
	c.interest()
}

// interest registers what the loop wants to hear of the socket: input
// unless enough is waiting (or the client is done), EPOLLOUT while output
// waits.
func (c *econn) interest() {
	if c.unwatched {
		return
	}
	var want uint32
	if !c.eof && !c.closing && len(c.in)-c.rpos < c.need+inHigh {
		want |= unix.EPOLLIN
	}
	if c.wpos < len(c.out) {
		want |= unix.EPOLLOUT
	}
	if want == c.events {
		return
	}
	ev := unix.EpollEvent{Events: want, Fd: int32(c.fd)}
	if err := unix.EpollCtl(c.l.epfd, unix.EPOLL_CTL_MOD, c.fd, &ev); err != nil {
		c.s.log.Warn("memcache: epoll_ctl mod", "remote", c.remote, "err", err)
		c.close()
		return
	}
	c.events = want
}

// process runs the complete commands in the input, in order, until one
// must wait (for the connection's writes in flight, a handoff, the client
// to read its answers) or the input ends mid-command; it reports the
// latter (starved).
func (c *econn) process() (starved bool) {
	s := c.s
	for !c.busy && !c.closing && !c.closed && !c.full() {
		if c.deaf && c.getNext > 0 {
			c.dropGet() // its client is gone: the rest is not fetched
			continue
		}
		if c.getNext > 0 && c.heldLen > 0 {
			// The multi-get at the head goes on from its next key.
			if c.inflight >= loopWindow || c.inBytes >= loopMaxBytes {
				return false
			}
			if c.runCmd(&c.held, nil, c.heldLen) {
				return false
			}
			continue
		}
		if c.swallow > 0 {
			n := min(c.swallow, len(c.in)-c.rpos)
			c.rpos += n
			c.swallow -= n
			if c.swallow > 0 {
				return true
			}
		}
		buf := c.in[c.rpos:]
		if len(buf) == 0 {
			return true
		}
		if !c.spoke && buf[0] == binaryMagic {
			if len(buf) < binaryHeaderLen && !c.eof {
				c.need = binaryHeaderLen
				return true
			}
			// Whole, or all the client will send of it: refused either
			// way, as the goroutine driver refuses what arrived.
			c.Write(binaryRefusal(buf))
			c.rpos = len(c.in) // closing with unread input would reset the answer away
			c.closing = true
			return false
		}
		if len(buf) < c.need {
			return true
		}
		c.spoke = true
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			if len(buf) > s.lineLimit(buf) {
				c.tooLong()
				return false
			}
			c.need = len(buf) + 1 // read on until the line ends
			return true
		}
		if i+1 > s.lineLimit(buf) {
			c.tooLong()
			return false
		}
		if c.inflight >= loopWindow || c.inBytes >= loopMaxBytes {
			return false // the pipeline is full: wait for its writes
		}
		cmd := c.parse(buf[:i+1])
		n := s.dataLen(&cmd)
		if len(buf) < i+1+n {
			c.need = i + 1 + n
			return true
		}
		c.need = 0
		var data []byte
		if n > 0 {
			data = buf[i+1 : i+1+n]
		}
		if c.deaf && (cmd.kind == cmdGet || cmd.kind == cmdGets) {
			c.consume(i + 1) // a read no one will get the answer of: not run
			continue
		}
		if c.runCmd(&cmd, data, i+1+n) {
			return false
		}
	}
	return false
}

// runCmd runs cmd, size bytes of the input from rpos (data its data
// block), on the loop or handed off, and reports whether the connection
// must wait before its next command (a handoff, the writes before it, the
// client to read the answers of a multi-get that goes on from getNext).
func (c *econn) runCmd(cmd *command, data []byte, size int) (wait bool) {
	if c.blocks(cmd) {
		if c.inflight > 0 {
			return true // after the writes before it
		}
		c.hold(cmd, size)
		c.handOff(cmd, data, size)
		return true
	}
	out := c.exec(c.ctx, cmd, data)
	if out.block { // a read that needs the disk: on from getNext
		c.hold(cmd, size)
		c.handOff(cmd, data, size)
		return true
	}
	if out.wait {
		c.hold(cmd, size)
		return true
	}
	c.consume(size)
	c.swallow = out.swallow
	if out.close {
		c.closing = true
	}
	return false
}

// hold keeps cmd, the command at the head of the input, for a multi-get
// that goes on from getNext.
func (c *econn) hold(cmd *command, size int) {
	if cmd != &c.held {
		c.held, c.heldLen = *cmd, size
	}
}

// consume drops the command at the head of the input, size bytes.
func (c *econn) consume(size int) {
	c.rpos += size
	c.held, c.heldLen = command{}, 0
}

// dropGet drops the multi-get at the head of the input, resumed from
// getNext, whose client is gone: the keys not yet answered are not
// fetched.
func (c *econn) dropGet() {
	c.endGet()
	c.consume(c.heldLen)
}

// tooLong closes the connection for a line over the limit, as the
// goroutine driver does (ErrLineTooLong): the answers to the commands
// before it are sent first, the rest of the input is dropped.
func (c *econn) tooLong() {
	c.s.log.Debug("memcache: closing connection", "remote", c.remote, "err", ErrLineTooLong)
	c.rpos = len(c.in)
	c.closing = true
}

// blocks reports whether cmd may block and so must not run on the loop:
// flush_all (the audit log, the bucket's flush), any command when a delayed
// flush_all is due, and where writes wait for more than memory (a level
// that waits for the disk, a replicated bucket: writesWaitNow) a gat or
// gats (a touch) and a refused set (it deletes the key).
func (c *econn) blocks(cmd *command) bool {
	s := c.s
	switch {
	case cmd.kind == cmdInvalid || cmd.kind == cmdMetaSet:
		return false
	case cmd.kind == cmdFlushAll:
		return true
	}
	if at := s.flushAt.Load(); at != 0 && s.clock.Now() >= at {
		return true
	}
	if !s.writesWaitNow() {
		return false
	}
	return cmd.kind == cmdGat || cmd.kind == cmdGats || (cmd.kind == cmdSet && s.tooLarge(cmd))
}

// handOff runs cmd, size bytes of the input from rpos, on a goroutine of
// its own; the connection's later commands wait until it is done
// (handoffDone). Its replies are bounded as the connection's own are
// (outHigh): a multi-get (a gat at a level that waits for the disk, a get
// of values read back from the disk) that fills them stops, and runs on,
// handed off again, once the client has read them.
func (c *econn) handOff(cmd *command, data []byte, size int) {
	sc := *cmd
	sc.keys = append([]string(nil), cmd.keys...)
	if data != nil {
		data = append([]byte(nil), data...)
	}
	h := &handoff{c: c, size: size}
	// A multi-get cut short by a full output (a delayed flush_all came due
	// meanwhile) or by a read that needs the disk goes on from where it
	// stopped.
	hs := &session{s: c.s, w: (*bufWriter)(&h.buf), drv: handoffDriver{&h.buf}, remote: c.remote, getNext: c.getNext, forwarded: c.forwarded, ahead: c.ahead, valued: c.valued}
	c.getNext, c.ahead, c.valued = 0, nil, false
	c.busy = true
	c.refs.Add(1)
	ctx, l := c.ctx, c.l
	go func() {
		defer c.release()
		defer func() {
			if r := recover(); r != nil {
				c.s.log.Error("memcache: panic serving connection", "remote", c.remote, "panic", r, "stack", string(debug.Stack()))
				h.out = outcome{close: true}
			}
			l.post(loopMsg{kind: msgHandoff, h: h})
		}()
		h.out = hs.exec(ctx, &sc, data)
		h.getNext, h.ahead, h.valued = hs.getNext, hs.ahead, hs.valued
	}()
}

// handoffDone takes a handed-off command's replies and outcome: the command
// is consumed, or, when its replies filled their bound (outcome.wait), it
// stays at the head of the input to go on from getNext once they are sent.
func (c *econn) handoffDone(h *handoff) {
	c.busy = false
	c.Write(h.buf)
	if h.out.wait && !h.out.close {
		c.getNext, c.ahead, c.valued = h.getNext, h.ahead, h.valued
		c.serve()
		return
	}
	c.consume(h.size)
	c.swallow = h.out.swallow
	if h.out.close {
		c.closing = true
	}
	c.serve()
}

// writeDone takes a pipelined write's reply: the replies at the head of
// the order that are known go to out, and the connection goes on once the
// loop has taken every message at hand.
func (c *econn) writeDone(pr *loopReply) {
	pr.done = true
	c.inflight--
	c.inBytes -= pr.size
	k := 0
	for ; k < len(c.pending) && c.pending[k].done; k++ {
		p := c.pending[k]
		c.out = append(c.out, p.reply...)
		c.out = append(c.out, "\r\n"...)
		c.out = append(c.out, p.after...)
		c.afterBytes -= len(p.after)
		c.pending[k] = nil
	}
	if k > 0 {
		n := copy(c.pending, c.pending[k:])
		clear(c.pending[n:])
		c.pending = c.pending[:n]
	}
	if !c.dirty {
		c.dirty = true
		c.l.dirty = append(c.l.dirty, c)
	}
}

// flush writes out what the socket takes, and reports whether it took
// any.
func (c *econn) flush() (sent bool) {
	if c.deaf {
		c.out, c.wpos = c.out[:0], 0
	}
	for c.wpos < len(c.out) {
		n, err := rawWrite(c.fd, c.out[c.wpos:])
		if n > 0 {
			c.wpos += n
			c.s.stats.bytesWritten.Add(int64(n))
			sent = true
		}
		switch {
		case err == nil && n > 0:
		case err == nil: // no progress: wait for EPOLLOUT rather than spin
			return sent
		case err == unix.EINTR:
		case err == unix.EAGAIN:
			return sent
		default:
			// The client is gone: nothing more to say, but what it sent
			// whole still runs (reads aside, as in ready).
			c.deaf = true
			c.out, c.wpos = c.out[:0], 0
			c.eof = true
			c.unwatch()
			return sent
		}
	}
	c.out, c.wpos = c.out[:0], 0
	if cap(c.out) > maxKeptOut {
		c.out = nil
	}
	return sent
}

// close closes the connection now. Its pipelined writes and handoff, if
// any, end on their own (under the connection's context), and done is
// called after them.
func (c *econn) close() {
	if c.closed {
		return
	}
	c.closed = true
	delete(c.l.conns, int32(c.fd))
	c.closeFD() // leaves the epoll set too: the socket has no other fd
	if c.pipe != nil {
		c.refs.Add(1)
		go func() {
			defer c.release()
			c.pipe.Wait()
		}()
	}
	c.release()
}

func (c *econn) closeFD() {
	unix.Close(c.fd)
	c.fd = -1
}

// release drops a hold on the connection; the last calls done.
func (c *econn) release() {
	if c.refs.Add(-1) == 0 {
		c.done()
	}
}

// bufWriter is a replyWriter into a byte slice.
type bufWriter []byte

func (b *bufWriter) Write(p []byte) (int, error) {
	*b = append(*b, p...)
	return len(p), nil
}

func (b *bufWriter) WriteString(s string) (int, error) {
	*b = append(*b, s...)
	return len(s), nil
}

func (b *bufWriter) WriteByte(c byte) error {
	*b = append(*b, c)
	return nil
}

// handoffDriver is the driver of a handed-off command: it runs on a
// goroutine of its own, after the connection's writes, and may block; its
// replies (buf) are full at outHigh, as the connection's output is.
type handoffDriver struct{ buf *[]byte }

func (handoffDriver) async(bool) bool { return false }

func (handoffDriver) submit(context.Context, string, int, bool, func(context.Context) string) {
	panic("memcache: a handed-off command does not pipeline")
}

func (handoffDriver) settled() bool { return true }

func (d handoffDriver) full() bool { return len(*d.buf) >= outHigh }

func (handoffDriver) mayBlock() bool { return true }

// The loop's own syscalls never block (its sockets are non-blocking and
// epoll_wait is asked not to wait), so they are made raw: without telling
// the scheduler, which for a syscall it is told of may hand the loop's P to
// another thread, and keeps its monitor polling every 20 µs while that
// goes on.

// rawRead is read(2) on a non-blocking fd; p is not empty.
func rawRead(fd int, p []byte) (int, error) {
	n, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// rawWrite is write(2) on a non-blocking fd; p is not empty.
func rawWrite(fd int, p []byte) (int, error) {
	n, _, e := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// pollNow is epoll_wait(2) with a timeout of 0: the events ready now.
func pollNow(epfd int, events []unix.EpollEvent) (int, error) {
	n, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(unsafe.Pointer(&events[0])), uintptr(len(events)), 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}
