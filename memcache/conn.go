package memcache

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"runtime/debug"
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

// conn is one client connection served by a goroutine of its own
// (IOGoroutines): it blocks on its reads, and on the writes it must wait
// for. It is used by that goroutine only.
type conn struct {
	session
	nc net.Conn
	// inData is set while a command's data block is read; cmdStart is when
	// the command being read was first seen waiting for more (zero between
	// commands).
	inData   bool
	cmdStart time.Time
	kicked   bool // closed by a timeout
	r        *bufio.Reader
	bw       *bufio.Writer
	line     []byte // a command line longer than the read buffer, assembled
	data     []byte // the data block buffer, reused up to maxKeptData

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

// full: never, as the connection's writes block until the client reads.
func (c *conn) full() bool { return false }

// mayBlock: yes, the connection has its goroutine.
func (c *conn) mayBlock() bool { return true }

// settled waits for every pipelined write, noreply ones too, and writes
// their replies: a command that is not a pipelined write (a read, stats,
// flush_all) sees the connection's earlier writes done.
func (c *conn) settled() bool {
	c.writePending()
	if c.pipe != nil {
		c.pipe.Drain()
	}
	return true
}

// writePending writes the replies of pipelined writes, in order, waiting
// for each.
func (c *conn) writePending() {
	for i, pr := range c.pending {
		<-pr.done
		c.bw.WriteString(pr.reply)
		c.bw.WriteString("\r\n")
		c.pending[i] = nil
	}
	c.pending = c.pending[:0]
}

// orderedWriter is the session's replyWriter of a conn: a reply written
// now goes out after those of the pipelined writes before it.
type orderedWriter struct{ c *conn }

func (o orderedWriter) Write(p []byte) (int, error) {
	o.c.writePending()
	return o.c.bw.Write(p)
}

func (o orderedWriter) WriteString(s string) (int, error) {
	o.c.writePending()
	return o.c.bw.WriteString(s)
}

func (o orderedWriter) WriteByte(b byte) error {
	o.c.writePending()
	return o.c.bw.WriteByte(b)
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
	if c.bw.Buffered() > 0 {
		if err := c.bw.Flush(); err != nil {
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

// serveConn runs one connection in the calling goroutine until the client
// leaves, a protocol rule closes it, or ctx is done.
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
	c := &conn{nc: nc}
	c.session = session{s: s, w: orderedWriter{c}, drv: c, remote: nc.RemoteAddr()}
	c.bw = bufio.NewWriterSize(countingWriter{nc, &s.stats.bytesWritten}, bufSize)
	c.r = bufio.NewReaderSize(connReader{c, &s.stats.bytesRead}, bufSize)
	defer func() {
		if c.pipe != nil {
			c.pipe.Wait() // every write the connection began ends before it does
		}
	}()
	if b, err := c.r.Peek(1); err == nil && b[0] == binaryMagic {
		head, _ := c.r.Peek(binaryHeaderLen) // what arrives of it before the timeout
		c.bw.Write(binaryRefusal(head))
		c.bw.Flush()
		c.r.Discard(c.r.Buffered()) // closing with unread input would reset the answer away
		return
	}
	for {
		c.cmdStart = time.Time{}
		line, err := c.readLine()
		if err != nil {
			c.closing(err)
			if errors.Is(err, ErrLineTooLong) {
				// The answers before the line still go out, as the
				// event loop sends them.
				c.writePending()
				c.bw.Flush()
			}
			return
		}
		cmd := c.parse(line)
		var data []byte
		if n := s.dataLen(&cmd); n > 0 {
			if data, err = c.readData(n); err != nil {
				return
			}
		}
		out := c.exec(ctx, &cmd, data)
		if out.swallow > 0 && c.discard(out.swallow) != nil {
			return
		}
		if out.close {
			c.writePending()
			c.bw.Flush()
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
				if len(c.line)+i+1 > c.s.lineLimit(start) {
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
			if len(c.line)+n > c.s.lineLimit(start) {
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
