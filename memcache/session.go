package memcache

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strconv"

	"github.com/mayflydb/mayfly/engine"
)

// A connection is served by one of two drivers (see Options.IO): a
// goroutine of its own that blocks on its reads (conn, conn.go), or an
// event loop on epoll that serves many (econn, eventloop_linux.go). Both run
// the same protocol code: the parser (parse.go), the commands on the engine
// (ops.go) and session, which runs one parsed command whose data block, if
// it has one, has arrived. What differs is how the bytes come and go and
// how a command that must wait is made to wait; the driver interface is
// that difference.

// replyWriter is where a session writes its replies. A driver keeps them in
// command order behind the replies of pipelined writes still in flight.
type replyWriter interface {
	Write(p []byte) (int, error)
	WriteString(s string) (int, error)
	WriteByte(c byte) error
}

// driver is what a session needs of the way its connection is served.
type driver interface {
	// async reports whether a write should go on the connection's pipeline
	// (submit) rather than run now.
	async(noreply bool) bool
	// submit runs a write on the connection's pipeline, after the earlier
	// writes to key; its reply, unless noreply, takes its place in command
	// order.
	submit(ctx context.Context, key string, size int, noreply bool, fn func(ctx context.Context) string)
	// settled reports whether every earlier pipelined write of the
	// connection is done, noreply ones too; a driver that can block waits
	// for them and says yes. A command that must see those writes (a read,
	// stats, flush_all) does nothing and asks to be run again later when
	// the answer is no.
	settled() bool
	// full reports whether the connection's unsent answers have reached
	// their bound: a multi-get stops there and runs on from the next key
	// when asked again (outcome.wait). A driver whose writes block (and so
	// hold the command until the client reads) says no.
	full() bool
	// mayBlock reports whether a command may wait for the disk where it
	// runs. One that must not (an event loop serving many connections)
	// runs commands from memory alone, and one that needs the store (an
	// ejected value, an item out of memory whole) stops there and runs on
	// where it may (outcome.block), a multi-get from that key.
	mayBlock() bool
}

// session is one connection's protocol state: it runs parsed commands and
// writes their replies.
type session struct {
	s      *Server
	w      replyWriter
	drv    driver
	remote net.Addr
	num    []byte   // scratch for formatting numbers
	keys   []string // room for a command's key list, reused (parseCommandInto)
	// noWait is a context already done, made once, that Options.Route
	// gets on a driver that may not block (routeOf).
	noWait context.Context
	// getNext is how many keys of the multi-get being answered are
	// answered already: its answer filled the driver's output (full), and
	// the same command runs again from this key.
	getNext int
	// forwarded says the connection is another node's, forwarding its
	// clients' commands (forward.go): they are carried out here, never
	// forwarded again.
	forwarded bool
	// uncounted counts the commands of a forwarded connection: the node
	// that forwarded them counts them, as its clients' (ops).
	uncounted counters
	// confirmed holds the partitions whose read barrier the multi-get
	// being answered took (Route.Barrier: once a partition per command).
	confirmed map[int]struct{}
	// ahead holds, by key position, the answers of the multi-get being
	// answered that its nodes sent ahead of their turn (forwardget.go);
	// nil until it reaches a remote key. It lasts as long as getNext, so
	// a multi-get resumed (outcome.wait, outcome.block) answers them
	// without asking again.
	ahead []aheadAnswer
	// valued says a VALUE block of the multi-get being answered was
	// written: a key it cannot answer then closes the connection
	// (getFailed). It lasts as long as getNext.
	valued bool
}

// outcome is what running a command asks of its driver.
type outcome struct {
	// close: close the connection once the replies written so far are sent.
	close bool
	// wait: earlier pipelined writes must finish first, or the answer so
	// far fills the output (full); nothing more was done, and the same
	// command is to be run again once settled() holds and the output has
	// room. Only a driver whose settled() or full() can say so sees it.
	wait bool
	// swallow is how many bytes of input (a refused data block and its
	// "\r\n") to discard after the command.
	swallow int
	// block: the command needs the store (a read's answer, what a write
	// builds on), and the driver must not wait for it (mayBlock); nothing
	// was done but the keys of a multi-get before getNext, which are
	// answered, and the same command is to run on from there where it may
	// block. Only a driver whose mayBlock says no sees it.
	block bool
}

// parse parses one command line into the session's reusable key list.
func (c *session) parse(line []byte) command {
	if cap(c.keys) > maxKeptKeys {
		c.keys = nil // do not keep a huge multi-get's list
	}
	cmd := parseCommandInto(line, c.keys)
	if cmd.keys != nil {
		c.keys = cmd.keys[:0]
	}
	return cmd
}

// dataLen returns the length of the data block, its "\r\n" included, that
// must have arrived before exec runs cmd; 0 when there is none to read (a
// storage command too large for an item has its block swallowed instead).
func (s *Server) dataLen(cmd *command) int {
	if (cmd.kind.isStorage() || cmd.kind == cmdMetaSet) && !s.tooLarge(cmd) {
		return cmd.vlen + 2
	}
	return 0
}

// tooLarge reports whether a storage command's item is over MaxItemSize.
func (s *Server) tooLarge(cmd *command) bool {
	return itemSize(len(cmd.keys[0]), cmd.flags, cmd.vlen) > s.opts.MaxItemSize
}

// needsSettled reports whether cmd must see the connection's earlier
// pipelined writes done before it runs: everything but a write that can go
// on the pipeline itself and a rejected line.
func (s *Server) needsSettled(cmd *command) bool {
	switch cmd.kind {
	case cmdInvalid, cmdMetaSet, cmdTouch, cmdDelete, cmdIncr, cmdDecr:
		return false
	case cmdSet, cmdAdd, cmdReplace, cmdAppend, cmdPrepend, cmdCas:
		return s.tooLarge(cmd)
	}
	return true
}

// ops carries the connection's commands out, counted in the server's
// stats; a forwarded connection's are counted by the node that forwarded
// them (countForwarded), not again here.
func (c *session) ops() ops {
	if c.forwarded {
		return ops{c.s, &c.uncounted}
	}
	return ops{c.s, &c.s.stats}
}

// exec runs one command. data is its data block ("\r\n" included) when
// dataLen says it has one, nil otherwise.
func (c *session) exec(ctx context.Context, cmd *command, data []byte) outcome {
	s := c.s
	if s.needsSettled(cmd) && !c.drv.settled() {
		return outcome{wait: true}
	}
	if cmd.countFlush {
		s.stats.cmdFlush.Add(1)
	}
	if cmd.kind == cmdInvalid {
		if cmd.close {
			return outcome{close: true}
		}
		if !cmd.noreply {
			c.reply(cmd.reply)
		}
		return outcome{swallow: cmd.swallow}
	}
	if cmd.kind == cmdMetaSet {
		return c.metaSet(cmd, data)
	}
	if c.getNext == 0 && needsBucket(cmd.kind) {
		if _, err := s.current(); err != nil {
			// No bucket of the name served (deleted): the command does
			// nothing, and says why.
			if !cmd.noreply {
				c.reply(serverError(err))
			}
			if cmd.kind.isStorage() && data == nil {
				return outcome{swallow: cmd.vlen + 2} // too large: not read
			}
			return outcome{}
		}
	}
	if err := s.flushIfDue(ctx); err != nil {
		s.log.Warn("memcache: delayed flush_all", "err", err)
	}
	switch cmd.kind {
	case cmdSet, cmdAdd, cmdReplace, cmdAppend, cmdPrepend, cmdCas:
		return c.storage(ctx, cmd, data)
	case cmdTouch, cmdDelete, cmdIncr, cmdDecr:
		key, kind, exptime, delta := cmd.keys[0], cmd.kind, cmd.exptime, cmd.delta
		rt, reply, remote := c.routeOf(ctx, key)
		if remote {
			return c.forwardWrite(ctx, cmd, key, rt, reply, keyLine(kind, key, exptime, delta), 0)
		}
		o := c.ops()
		write := func(ctx context.Context, resident bool) (string, error) {
			switch kind {
			case cmdTouch:
				return o.touch(ctx, key, exptime, resident)
			case cmdDelete:
				return o.delete(ctx, key, resident)
			default:
				return o.arith(ctx, key, kind == cmdIncr, delta, resident)
			}
		}
		if c.drv.async(cmd.noreply) {
			c.drv.submit(ctx, key, 0, cmd.noreply, func(ctx context.Context) string {
				r, err := write(ctx, false)
				if err != nil {
					r = s.followed(ctx, rt, r, err, keyLine(kind, key, exptime, delta))
				}
				return r
			})
			return outcome{}
		}
		r, err := write(ctx, !c.drv.mayBlock())
		if c.mayFollow(err) {
			r, err = s.followed(ctx, rt, r, err, keyLine(kind, key, exptime, delta)), nil
		}
		return c.ran(r, err, cmd.noreply)
	}
	var r string
	switch cmd.kind {
	case cmdGet, cmdGets, cmdGat, cmdGats:
		return c.retrieve(ctx, cmd)
	case cmdFlushAll:
		r = replyOK
		if !s.flushEnabled() {
			r = replyFlushDisabled
		} else if s.delayedOnCluster(cmd.exptime) {
			r = replyDelayedFlush
		} else if err := c.auditFlush(ctx, cmd.exptime); err != nil {
			s.log.Error("memcache: flush_all refused: audit log", "remote", c.remote, "err", err)
			r = replyAuditFailed
		} else if err := s.flushAll(ctx, cmd.exptime); err != nil {
			r = serverError(err)
		}
	case cmdStats:
		c.statsReply(cmd.sub)
		return outcome{}
	case cmdVersion:
		r = "VERSION " + s.opts.Version
	case cmdVerbosity:
		s.verbosity.Store(uint32(min(cmd.delta, maxVerbosity)))
		r = replyOK
	case cmdQuit:
		return outcome{close: true}
	case cmdForwarded:
		c.forwarded = true
		r = replyOK
	}
	if !cmd.noreply {
		c.reply(r)
	}
	return outcome{}
}

// needsBucket reports whether a command of kind k works on the bucket's
// documents, and so is answered with the error when there is no bucket to
// serve (Server.current).
func needsBucket(k cmdKind) bool {
	switch k {
	case cmdSet, cmdAdd, cmdReplace, cmdAppend, cmdPrepend, cmdCas,
		cmdTouch, cmdDelete, cmdIncr, cmdDecr,
		cmdGet, cmdGets, cmdGat, cmdGats, cmdFlushAll:
		return true
	}
	return false
}

// replyFlushDisabled answers a flush_all on a bucket whose flushEnabled
// is off: memcached's answer when its flush_all is disabled (-F), which
// counts the command in cmd_flush too and flushes nothing.
const replyFlushDisabled = "CLIENT_ERROR flush_all not allowed"

// replyDelayedFlush answers a flush_all with a delay on a bucket whose
// writes are replicated (a cluster's): a delayed flush would run on this
// node's schedule alone; flush_all without a delay flushes every node.
const replyDelayedFlush = replyServerErrorSP + "flush_all with a delay is not available on a cluster bucket; flush_all without one flushes every node"

// replyAuditFailed answers a flush_all whose audit record failed.
const replyAuditFailed = replyServerErrorSP + "audit log unavailable"

// auditFlush records a flush_all through Options.Audit, if set.
func (c *session) auditFlush(ctx context.Context, delay int64) error {
	if c.s.opts.Audit == nil {
		return nil
	}
	return c.s.opts.Audit(ctx, AuditEvent{Action: ActionFlushAll, Remote: c.remote.String(), Delay: delay})
}

// maxVerbosity is memcached's MAX_VERBOSITY_LEVEL.
const maxVerbosity = 2

// reply writes one reply line.
func (c *session) reply(s string) {
	c.w.WriteString(s)
	c.w.WriteString("\r\n")
}

// ran is the outcome of a write run now (not pipelined) that answered r,
// or err: engine.ErrWouldBlock, the write, run from memory alone where the
// driver must not block, needs the store and did nothing; or a refusal
// naming the partition's leader (refused) where the driver must not wait
// for a forward (mayFollow). The command is then run again where it may
// block (outcome.block), as a get is.
func (c *session) ran(r string, err error, noreply bool) outcome {
	if err != nil {
		return outcome{block: true}
	}
	if !noreply {
		c.reply(r)
	}
	return outcome{}
}

// mayFollow reports whether err, a local write's, is a refusal naming
// the partition's leader (refused) that this driver may follow now
// (Server.followed waits for the leader's answer).
func (c *session) mayFollow(err error) bool {
	return err != nil && !errors.Is(err, engine.ErrWouldBlock) && c.drv.mayBlock()
}

// metaSet answers an "ms" line, which the port does not serve, once its
// data block has been read (data) or, for a block over the item size limit,
// is to be swallowed (data nil), with memcached's answers to a block it
// cannot take: too large (counted in store_too_large), or not ending in
// "\r\n"; otherwise ERROR.
func (c *session) metaSet(cmd *command, data []byte) outcome {
	switch {
	case data == nil:
		c.s.stats.storeTooLarge.Add(1) // memcached counts it too
		c.reply(replyTooLarge)
		return outcome{swallow: cmd.vlen + 2}
	case data[cmd.vlen] != '\r' || data[cmd.vlen+1] != '\n':
		c.reply(replyBadDataChunk)
	default:
		c.reply(replyError)
	}
	return outcome{}
}

// storage stores a storage command's data block, or refuses an item over
// the size limit (its block is then swallowed).
func (c *session) storage(ctx context.Context, cmd *command, data []byte) outcome {
	s := c.s
	key := cmd.keys[0]
	resident := !c.drv.mayBlock()
	if data == nil { // too large (dataLen)
		// As memcached: a failed set must not leave stale data behind.
		if rt, reply, remote := c.routeOf(ctx, key); remote && cmd.kind == cmdSet {
			if resident {
				return outcome{block: true}
			}
			if reply == "" {
				s.forwardReply(ctx, rt, keyLine(cmdDelete, key, 0, 0))
			}
		} else if cmd.kind == cmdSet && s.deleteQuietly(ctx, key, resident) != nil {
			return outcome{block: true} // engine.ErrWouldBlock
		}
		s.stats.storeTooLarge.Add(1)
		if !cmd.noreply {
			c.reply(replyTooLarge)
		}
		return outcome{swallow: cmd.vlen + 2}
	}
	o := c.ops()
	if data[cmd.vlen] != '\r' || data[cmd.vlen+1] != '\n' {
		o.st.cmdSet.Add(1)
		if !cmd.noreply {
			c.reply(replyBadDataChunk)
		}
		return outcome{}
	}
	rt, reply, remote := c.routeOf(ctx, key)
	if remote { // counted in cmd_set once answered (countForwarded)
		return c.forwardWrite(ctx, cmd, key, rt, reply, storageLine(cmd, key, data[:cmd.vlen]), cmd.vlen)
	}
	if !c.drv.async(cmd.noreply) {
		r, err := o.store(ctx, cmd, key, data[:cmd.vlen], resident)
		if c.mayFollow(err) {
			r, err = s.followed(ctx, rt, r, err, storageLine(cmd, key, data[:cmd.vlen])), nil
		}
		if err == nil { // else run again where it may block: counted then
			o.st.cmdSet.Add(1)
		}
		return c.ran(r, err, cmd.noreply)
	}
	o.st.cmdSet.Add(1)
	// The data block is the connection's buffer, reused by the next
	// command: the pipelined write gets its own copy, and its own copy of
	// the command.
	val := append([]byte(nil), data[:cmd.vlen]...)
	sc := *cmd
	sc.keys = nil // the connection's, reused by the next command
	c.drv.submit(ctx, key, len(val), cmd.noreply, func(ctx context.Context) string {
		r, err := o.store(ctx, &sc, key, val, false)
		if err != nil {
			r = s.followed(ctx, rt, r, err, storageLine(&sc, key, val))
		}
		return r
	})
	return outcome{}
}

// forwardWrite carries out a write (req, the command as the leader is
// sent it) at rt's node, on the connection's pipeline when writes are in
// flight there, else now where the driver may wait (else it asks to be
// run where it may). reply, when set, answers the command instead: its
// partition has no leader to go to.
// The command is counted in this node's stats, once, as one carried out
// here is, from the reply (countForwarded).
func (c *session) forwardWrite(ctx context.Context, cmd *command, key string, rt Route, reply string, req []byte, size int) outcome {
	s := c.s
	kind := cmd.kind
	if reply == "" {
		if c.drv.async(cmd.noreply) {
			c.drv.submit(ctx, key, size, cmd.noreply, func(ctx context.Context) string {
				r := s.forwardReply(ctx, rt, req)
				s.countForwarded(kind, r)
				return r
			})
			return outcome{}
		}
		if !c.drv.mayBlock() {
			return outcome{block: true} // run again where it may wait: counted then
		}
		reply = s.forwardReply(ctx, rt, req)
	}
	s.countForwarded(kind, reply)
	if !cmd.noreply {
		c.reply(reply)
	}
	return outcome{}
}

// discardWriter is a replyWriter that drops what it is given.
type discardWriter struct{}

func (discardWriter) Write(p []byte) (int, error)       { return len(p), nil }
func (discardWriter) WriteString(s string) (int, error) { return len(s), nil }
func (discardWriter) WriteByte(byte) error              { return nil }

// retrieve answers get, gets, gat and gats. A key it cannot answer (an
// engine failure, a refused read barrier, a key another node leads that
// could not be answered there) ends the get with a SERVER_ERROR, and the
// connection closes only when part of the answer is out (getFailed).
func (c *session) retrieve(ctx context.Context, cmd *command) outcome {
	s := c.s
	withCAS := cmd.kind == cmdGets || cmd.kind == cmdGats
	touch := cmd.kind == cmdGat || cmd.kind == cmdGats
	// A line with a bad key is answered with an error alone, as memcached
	// does, though the keys before it are served (and counted, and touched).
	w := c.w
	if cmd.reply != "" {
		w = discardWriter{}
	}
	if c.getNext == 0 {
		clear(c.confirmed) // a new command
		c.ahead, c.valued = nil, false
	}
	for i := c.getNext; i < len(cmd.keys); i++ {
		if i > c.getNext && c.drv.full() {
			c.getNext = i // on from here once the client has read some
			return outcome{wait: true}
		}
		key := cmd.keys[i]
		if done, reply := c.fromAhead(w, i, key, withCAS, touch); reply != "" {
			return c.getFailed(cmd, reply)
		} else if done {
			continue
		}
		rt, reply, remote := c.routeOf(ctx, key)
		if remote && reply != "" && c.forwarded {
			// The forwarding node's refused batch: name the leaders of
			// the keys after this one too (forwardget.go).
			reply = c.refusalNaming(ctx, reply, cmd.keys[i+1:])
		}
		if !remote {
			var block bool
			if reply, block = c.confirmRead(ctx, rt); block {
				c.getNext = i // on from here where the barrier may wait
				return outcome{block: true}
			}
			if reply != "" {
				return c.getFailed(cmd, reply) // a deposed leader's refused barrier
			}
		}
		if remote {
			if reply == "" && !c.drv.mayBlock() {
				c.getNext = i // on from here where the round trip may wait
				return outcome{block: true}
			}
			if reply == "" && !s.opts.private.perKeyGets && c.aheadAt(i) == aheadNone {
				// The first remote key not asked yet: ask every node
				// for its keys from here on, one command each.
				c.fetchAhead(ctx, cmd, i, rt)
				if done, reply := c.fromAhead(w, i, key, withCAS, touch); reply != "" {
					return c.getFailed(cmd, reply)
				} else if done {
					continue
				}
			}
			var d *engine.Document
			if reply == "" {
				d, reply = s.forwardGet(ctx, rt, key, touch, cmd.exptime)
			}
			if reply != "" {
				return c.getFailed(cmd, reply)
			}
			s.countForwardedRead(touch, d != nil)
			if d != nil {
				c.writeValue(w, key, d, withCAS)
			}
			continue
		}
		var (
			d   *engine.Document
			err error
		)
		if touch {
			d, err = c.ops().getAndTouch(ctx, key, cmd.exptime, !c.drv.mayBlock())
		} else {
			d, err = c.ops().get(ctx, key, !c.drv.mayBlock())
		}
		if errors.Is(err, engine.ErrWouldBlock) {
			c.getNext = i // on from here where the read may wait
			return outcome{block: true}
		}
		if leader := engine.FollowableLeader(err); touch && leader != "" && rt.Reroute != nil && !c.forwarded {
			// A gat this node's replication refused before doing
			// anything of it, naming the leader (leadership moved
			// since the route was made): carried out there, once, as
			// the other writes are (Server.followed).
			if !c.drv.mayBlock() {
				c.getNext = i // on from here where the round trip may wait
				return outcome{block: true}
			}
			if nrt, ok := rt.Reroute(ctx, leader); ok && nrt.Addr != "" {
				var reply string
				if d, reply = s.forwardGet(ctx, nrt, key, touch, cmd.exptime); reply != "" {
					return c.getFailed(cmd, reply)
				}
				err = nil
			}
		}
		if err != nil {
			return c.getFailed(cmd, serverError(err))
		}
		if d == nil {
			continue
		}
		c.writeValue(w, key, d, withCAS)
	}
	c.endGet()
	if cmd.reply != "" {
		c.reply(cmd.reply)
		return outcome{}
	}
	c.reply(replyEnd)
	return outcome{}
}

// getFailed ends the multi-get being answered (cmd) with reply, the
// SERVER_ERROR of a key it could not answer: the engine failed (a value
// that could not be read back from disk, the bucket closing), this node's
// read barrier refused (it no longer leads the key's partition), or
// another node leads the key and it could not have answered there: no
// leader to go to (Route's error), a leader that could not be reached,
// broke off or refused (forwardGet), or a batch that broke off
// (fromAhead). When none of the get's VALUE blocks was written (a
// line with a bad key writes none), the reply is its whole answer and the
// connection serves on, its stream in step: the client reads the error
// and then the answers of the commands it pipelined after the get, as
// memcached answers a get it failed. Once one was written, the connection
// closes after the reply: the client reads VALUE blocks until END, and
// neither more VALUE blocks nor END would be true, while an error line
// there is one it may take for the end or a garbled block. (memcached 1.6
// drops a multi-get's answer when it fails midway and answers the error
// alone, keeping the connection, since it sends nothing of a multi-get
// before the whole answer is built; Mayfly streams the answer, bounded,
// and cannot take back what it wrote.) A forwarded connection's refused
// get closes always, as before: the forwarding node never reuses a
// connection after a retrieval it did not end with END (leaderCloses).
func (c *session) getFailed(cmd *command, reply string) outcome {
	started := c.valued && cmd.reply == ""
	c.endGet()
	c.reply(reply)
	return outcome{close: started || c.forwarded}
}

// endGet ends the multi-get being answered: the next retrieval is a new
// command.
func (c *session) endGet() {
	c.getNext = 0
	c.ahead = nil
	c.valued = false
}

// writeValue writes one "VALUE key flags bytes [cas]" block.
func (c *session) writeValue(w replyWriter, key string, d *engine.Document, withCAS bool) {
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
	c.valued = true
	w.Write(b)
	w.Write(d.Value)
	w.WriteString("\r\n")
}

// statsReply answers "stats" and its sub-commands.
func (c *session) statsReply(sub string) {
	s := c.s
	var lines []stat
	switch sub {
	case "":
		lines = s.generalStats()
	case "settings":
		lines = s.settingsStats()
	case "warmup":
		if b := s.target().bucket; b != nil {
			lines = warmupStats(b.WarmupStats())
		}
	case "reset":
		s.resetStats()
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

// lineLimit is the longest line allowed given its start: memcached lets a
// line that starts (after at most 100 spaces) with "get " or "gets " grow,
// and Mayfly does the same for "gat " and "gats ".
func (s *Server) lineLimit(start []byte) int {
	p := bytes.TrimLeft(start, " ")
	if len(start)-len(p) <= 100 {
		for _, pre := range [...]string{"get ", "gets ", "gat ", "gats "} {
			if bytes.HasPrefix(p, []byte(pre)) {
				return s.opts.MaxGetLineLen
			}
		}
	}
	return s.opts.MaxLineLen
}
