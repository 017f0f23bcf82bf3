package memcache

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"runtime/debug"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/mayflydb/mayfly/engine"
)

// bufSize is the size of a connection's read and write buffers (memcached's
// READ_BUFFER_SIZE).
const bufSize = 16 << 10

// maxKeptData is the largest data buffer a connection keeps between
// commands; bigger values get a buffer of their own.
const maxKeptData = 64 << 10

// maxKeptKeys is the longest key list a connection keeps between commands.
const maxKeptKeys = 64

// conn is one client connection. It is used by one goroutine only.
type conn struct {
	s  *Server
	nc net.Conn
	// inData is set while a command's data block is read; cmdStart is when
	// the command being read was first seen waiting for more (zero between
	// commands).
	inData   bool
	cmdStart time.Time
	kicked   bool // closed by a timeout
	r        *bufio.Reader
	w        *bufio.Writer
	line     []byte   // a command line longer than the read buffer, assembled
	data     []byte   // the data block buffer, reused up to maxKeptData
	num      []byte   // scratch for formatting numbers
	keys     []string // room for a command's key list, reused (parseCommandInto)

	// Pipelined writes: a write that arrives while more input is buffered,
	// or while earlier writes are in flight, or with noreply, runs on pipe
	// (made at the first), so that the writes of one connection share group
	// commits instead of waiting for the disk one by one. Writes to one key
	// stay in order (the pipeline chains them), and replies go out in
	// command order: pending holds the replies still to write.
	pipe    *engine.Pipeline
	pending []*pendingReply
}

// pendingReply is the reply of a pipelined write, known once done is
// closed.
type pendingReply struct {
	done  <-chan struct{}
	reply string
}

// Pipeline bounds for one connection: writes in flight, and the bytes of
// their values.
const (
	pipeWindow   = 256
	pipeMaxBytes = 4 << 20
)

// async reports whether a write should go on the pipeline rather than run
// now: more commands are waiting, earlier writes are still running, or the
// client asked for no reply.
func (c *conn) async(noreply bool) bool {
	return noreply || c.r.Buffered() > 0 || (c.pipe != nil && c.pipe.InFlight() > 0)
}

// submit runs a write on the connection's pipeline, after the earlier
// writes to key; its reply, unless noreply, is written in command order.
func (c *conn) submit(ctx context.Context, key string, size int, noreply bool, fn func(ctx context.Context) string) {
	if c.pipe == nil {
		c.pipe = engine.NewPipeline(ctx, &engine.PipelineOptions{Window: pipeWindow, MaxBytes: pipeMaxBytes})
	}
	if noreply {
		c.pipe.Go(key, size, func(ctx context.Context) { fn(ctx) })
		return
	}
	pr := &pendingReply{}
	pr.done = c.pipe.Go(key, size, func(ctx context.Context) { pr.reply = fn(ctx) }).Done()
	c.pending = append(c.pending, pr)
}

// writePending writes the replies of pipelined writes, in order, waiting
// for each.
func (c *conn) writePending() {
	for i, pr := range c.pending {
		<-pr.done
		c.reply(pr.reply)
		c.pending[i] = nil
	}
	c.pending = c.pending[:0]
}

// settle writes the pending replies and waits for every pipelined write,
// noreply ones too: a command that is not a pipelined write (a read, stats,
// flush_all) sees the connection's earlier writes done.
func (c *conn) settle() {
	c.writePending()
	if c.pipe != nil {
		c.pipe.Drain()
	}
}

// connReader is what a connection's bufio.Reader reads from: before it
// may block on the network it sends the answers waiting in the writer (so a
// pipeline is answered in one write, and a client waiting for an answer
// before it sends more is never stuck), and it counts bytes_read.
type connReader struct {
	c *conn
	n *atomic.Int64
}

func (cr connReader) Read(p []byte) (int, error) {
	c := cr.c
	c.writePending()
	if c.w.Buffered() > 0 {
		if err := c.w.Flush(); err != nil {
			return 0, err
		}
	}
	c.setDeadline()
	n, err := c.nc.Read(p)
	cr.n.Add(int64(n))
	return n, err
}

// setDeadline sets the read deadline before the connection blocks: the idle
// timeout between commands, the command timeout from the moment a command
// was first found unfinished.
func (c *conn) setDeadline() {
	o := &c.s.opts
	now := time.Now() // wall clock: connection timeouts
	partial := c.inData || c.r.Buffered() > 0 || len(c.line) > 0
	var d time.Time
	switch {
	case partial && o.CommandTimeout > 0:
		if c.cmdStart.IsZero() {
			c.cmdStart = now
		}
		d = c.cmdStart.Add(o.CommandTimeout)
	case !partial && o.IdleTimeout > 0:
		d = now.Add(o.IdleTimeout)
	}
	c.nc.SetReadDeadline(d)
}

// countingWriter feeds bytes_written.
type countingWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	return n, err
}

// serveConn runs one connection until the client leaves, a protocol rule
// closes it, or ctx is done.
func (s *Server) serveConn(ctx context.Context, nc net.Conn) {
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	defer stop()
	defer nc.Close()
	defer func() {
		// A bug must cost one connection, not the server (as net/http).
		if r := recover(); r != nil {
			s.log.Error("memcache: panic serving connection", "remote", nc.RemoteAddr(), "panic", r, "stack", string(debug.Stack()))
		}
	}()
	c := &conn{s: s, nc: nc}
	c.w = bufio.NewWriterSize(countingWriter{nc, &s.stats.bytesWritten}, bufSize)
	c.r = bufio.NewReaderSize(connReader{c, &s.stats.bytesRead}, bufSize)
	defer func() {
		if c.pipe != nil {
			c.pipe.Wait() // every write the connection began ends before it does
		}
	}()
	for {
		c.cmdStart = time.Time{}
		line, err := c.readLine()
		if err != nil {
			c.closing(err)
			return
		}
		if cap(c.keys) > maxKeptKeys {
			c.keys = nil // do not keep a huge multi-get's list
		}
		cmd := parseCommandInto(line, c.keys)
		if cmd.keys != nil {
			c.keys = cmd.keys[:0]
		}
		ok := c.exec(ctx, &cmd)
		if c.kicked {
			return
		}
		if !ok {
			c.writePending()
			c.w.Flush()
			return
		}
	}
}

// closing notes why a connection is closed by a read error: a timeout is
// an idle kick.
func (c *conn) closing(err error) {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		c.kicked = true
		c.s.stats.idleKicks.Add(1)
		c.s.log.Debug("memcache: closing idle or stalled connection", "remote", c.nc.RemoteAddr(), "partial", !c.cmdStart.IsZero())
		return
	}
	if errors.Is(err, ErrLineTooLong) {
		c.s.log.Debug("memcache: closing connection", "remote", c.nc.RemoteAddr(), "err", err)
	}
}

// readLine returns the next command line, terminator included. The slice is
// valid until the next read. A line over the limit (MaxLineLen, or
// MaxGetLineLen for a retrieval) is ErrLineTooLong, found as soon as that
// many bytes without a newline have arrived, as memcached does.
func (c *conn) readLine() ([]byte, error) {
	if cap(c.line) > maxKeptData {
		c.line = nil // do not keep a huge multi-get's buffer
	}
	c.line = c.line[:0]
	for {
		n := c.r.Buffered()
		if n > 0 {
			b, _ := c.r.Peek(n)
			start := b
			if len(c.line) > 0 {
				start = c.line
			}
			if i := bytes.IndexByte(b, '\n'); i >= 0 {
				if len(c.line)+i+1 > c.lineLimit(start) {
					return nil, ErrLineTooLong
				}
				frag, err := c.r.ReadSlice('\n') // buffered: does not block
				if err != nil {
					return nil, err
				}
				if len(c.line) == 0 {
					return frag, nil
				}
				c.line = append(c.line, frag...)
				return c.line, nil
			}
			if len(c.line)+n > c.lineLimit(start) {
				return nil, ErrLineTooLong
			}
			if n == c.r.Size() {
				c.line = append(c.line, b...)
				c.r.Discard(n)
				continue
			}
		}
		// Wait for more input: one read of the connection.
		if _, err := c.r.Peek(n + 1); err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return nil, err
		}
	}
}

// lineLimit is the longest line allowed given its start: memcached lets a
// line that starts (after at most 100 spaces) with "get " or "gets " grow,
// and Mayfly does the same for "gat " and "gats ".
func (c *conn) lineLimit(start []byte) int {
	p := bytes.TrimLeft(start, " ")
	if len(start)-len(p) <= 100 {
		for _, pre := range [...]string{"get ", "gets ", "gat ", "gats "} {
			if bytes.HasPrefix(p, []byte(pre)) {
				return c.s.opts.MaxGetLineLen
			}
		}
	}
	return c.s.opts.MaxLineLen
}

// reply writes one reply line.
func (c *conn) reply(s string) {
	c.w.WriteString(s)
	c.w.WriteString("\r\n")
}

// readData reads a data block of n bytes (its "\r\n" included).
func (c *conn) readData(n int) ([]byte, error) {
	var buf []byte
	if n <= maxKeptData {
		if cap(c.data) < n {
			// Grown to what the values need, not to maxKeptData at once: a
			// connection of small values keeps a small buffer.
			c.data = make([]byte, n, min(max(n, 2*cap(c.data), 256), maxKeptData))
		}
		buf = c.data[:n]
	} else {
		buf = make([]byte, n)
	}
	c.inData = true
	_, err := io.ReadFull(c.r, buf)
	c.inData = false
	if err != nil {
		c.closing(err)
		return nil, err
	}
	return buf, nil
}

// discard swallows n bytes of input.
func (c *conn) discard(n int) error {
	c.inData = true
	_, err := c.r.Discard(n)
	c.inData = false
	if err != nil {
		c.closing(err)
	}
	return err
}

// exec runs one command and reports whether to keep the connection.
func (c *conn) exec(ctx context.Context, cmd *command) bool {
	s := c.s
	if cmd.countFlush {
		s.stats.cmdFlush.Add(1)
	}
	if cmd.kind == cmdInvalid {
		if cmd.close {
			return false
		}
		c.writePending() // replies go out in command order
		if !cmd.noreply {
			c.reply(cmd.reply)
		}
		if cmd.swallow > 0 {
			return c.discard(cmd.swallow) == nil
		}
		return true
	}
	if err := s.flushIfDue(ctx); err != nil {
		s.log.Warn("memcache: delayed flush_all", "err", err)
	}
	switch cmd.kind {
	case cmdSet, cmdAdd, cmdReplace, cmdAppend, cmdPrepend, cmdCas:
		return c.storage(ctx, cmd)
	case cmdTouch, cmdDelete, cmdIncr, cmdDecr:
		key, kind, exptime, delta := cmd.keys[0], cmd.kind, cmd.exptime, cmd.delta
		write := func(ctx context.Context) string {
			switch kind {
			case cmdTouch:
				return s.touch(ctx, key, exptime)
			case cmdDelete:
				return s.delete(ctx, key)
			default:
				return s.arith(ctx, key, kind == cmdIncr, delta)
			}
		}
		if c.async(cmd.noreply) {
			c.submit(ctx, key, 0, cmd.noreply, write)
		} else if !cmd.noreply {
			c.reply(write(ctx))
		}
		return true
	}
	// Every other command sees the connection's earlier writes done, and
	// answers after their replies.
	c.settle()
	var r string
	switch cmd.kind {
	case cmdGet, cmdGets, cmdGat, cmdGats:
		return c.retrieve(ctx, cmd)
	case cmdFlushAll:
		r = replyOK
		if err := c.auditFlush(ctx, cmd.exptime); err != nil {
			s.log.Error("memcache: flush_all refused: audit log", "remote", c.nc.RemoteAddr(), "err", err)
			r = replyAuditFailed
		} else if err := s.flushAll(ctx, cmd.exptime); err != nil {
			r = serverError(err)
		}
	case cmdStats:
		c.statsReply(cmd.sub)
		return true
	case cmdVersion:
		r = "VERSION " + s.opts.Version
	case cmdVerbosity:
		s.verbosity.Store(uint32(min(cmd.delta, maxVerbosity)))
		r = replyOK
	case cmdQuit:
		return false
	}
	if !cmd.noreply {
		c.reply(r)
	}
	return true
}

// replyAuditFailed answers a flush_all whose audit record failed.
const replyAuditFailed = replyServerErrorSP + "audit log unavailable"

// auditFlush records a flush_all through Options.Audit, if set.
func (c *conn) auditFlush(ctx context.Context, delay int64) error {
	if c.s.opts.Audit == nil {
		return nil
	}
	return c.s.opts.Audit(ctx, AuditEvent{Action: ActionFlushAll, Remote: c.nc.RemoteAddr().String(), Delay: delay})
}

// maxVerbosity is memcached's MAX_VERBOSITY_LEVEL.
const maxVerbosity = 2

// storage reads a storage command's data block and stores it.
func (c *conn) storage(ctx context.Context, cmd *command) bool {
	s := c.s
	key := cmd.keys[0]
	if itemSize(len(key), cmd.flags, cmd.vlen) > s.opts.MaxItemSize {
		s.stats.storeTooLarge.Add(1)
		c.settle() // the delete below comes after the earlier writes
		if !cmd.noreply {
			c.reply(replyTooLarge)
		}
		if err := c.discard(cmd.vlen + 2); err != nil {
			return false
		}
		if cmd.kind == cmdSet {
			// As memcached: a failed set must not leave stale data behind.
			s.deleteQuietly(ctx, key)
		}
		return true
	}
	data, err := c.readData(cmd.vlen + 2)
	if err != nil {
		return false
	}
	s.stats.cmdSet.Add(1)
	if data[cmd.vlen] != '\r' || data[cmd.vlen+1] != '\n' {
		c.writePending()
		if !cmd.noreply {
			c.reply(replyBadDataChunk)
		}
		return true
	}
	if !c.async(cmd.noreply) {
		r := s.store(ctx, cmd, key, data[:cmd.vlen])
		if !cmd.noreply {
			c.reply(r)
		}
		return true
	}
	// The data buffer is the connection's, reused by the next command: the
	// pipelined write gets its own copy, and its own copy of the command.
	val := append([]byte(nil), data[:cmd.vlen]...)
	sc := *cmd
	sc.keys = nil // the connection's, reused by the next command
	c.submit(ctx, key, len(val), cmd.noreply, func(ctx context.Context) string { return s.store(ctx, &sc, key, val) })
	return true
}

// retrieve answers get, gets, gat and gats. It reports whether to keep the
// connection: after an engine failure midway it is closed, since part of the
// answer may be out already.
func (c *conn) retrieve(ctx context.Context, cmd *command) bool {
	s := c.s
	withCAS := cmd.kind == cmdGets || cmd.kind == cmdGats
	touch := cmd.kind == cmdGat || cmd.kind == cmdGats
	// A line with a bad key is answered with an error alone, as memcached
	// does, though the keys before it are served (and counted, and touched).
	w := c.w
	if cmd.reply != "" {
		w = bufio.NewWriter(io.Discard)
	}
	for _, key := range cmd.keys {
		var (
			d   *engine.Document
			err error
		)
		if touch {
			d, err = s.getAndTouch(ctx, key, cmd.exptime)
		} else {
			d, err = s.get(ctx, key)
		}
		if err != nil {
			c.reply(serverError(err))
			return false
		}
		if d == nil {
			continue
		}
		c.writeValue(w, key, d, withCAS)
	}
	if cmd.reply != "" {
		c.reply(cmd.reply)
		return true
	}
	c.reply(replyEnd)
	return true
}

// writeValue writes one "VALUE key flags bytes [cas]" block.
func (c *conn) writeValue(w *bufio.Writer, key string, d *engine.Document, withCAS bool) {
	b := append(c.num[:0], "VALUE "...)
	b = append(b, key...)
	b = append(b, ' ')
	b = strconv.AppendUint(b, uint64(d.Flags), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(len(d.Value)), 10)
	if withCAS {
		b = append(b, ' ')
		b = strconv.AppendUint(b, d.CAS, 10)
	}
	b = append(b, '\r', '\n')
	c.num = b
	w.Write(b)
	w.Write(d.Value)
	w.WriteString("\r\n")
}

// statsReply answers "stats" and its sub-commands.
func (c *conn) statsReply(sub string) {
	s := c.s
	var lines []stat
	switch sub {
	case "":
		lines = s.generalStats()
	case "settings":
		lines = s.settingsStats()
	case "warmup":
		lines = warmupStats(s.bucket.WarmupStats())
	case "reset":
		s.stats.reset()
		c.reply(replyReset)
		return
	case "detail":
		c.reply(replyOK)
		return
	case "items", "slabs", "sizes", "conns", "detail dump":
		// Mayfly has no slabs and keeps no per-prefix stats: nothing to list.
	}
	for _, l := range lines {
		c.w.WriteString("STAT ")
		c.w.WriteString(l.name)
		c.w.WriteByte(' ')
		c.w.WriteString(l.value)
		c.w.WriteString("\r\n")
	}
	c.reply(replyEnd)
}
