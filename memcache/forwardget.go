package memcache

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/mayflydb/mayfly/engine"
)

// A forwarded multi-get (get, gets, gat, gats) makes one round trip a node,
// not one a key. When the answer reaches its first key another node leads
// that has not been asked for yet, the session routes the keys from there
// on (at most fwdBatchKeys of them a round) and sends each node leading
// some of them one command carrying them, of the client's kind, in the
// client's order; the nodes are asked together, one goroutine each, and
// their answers are kept by key position (session.ahead) until the answer
// reaches each key. A key local at that moment is left for its turn, as
// before (the read barrier, the engine).
//
// The leader answers VALUE blocks in the order it was asked, then END; a
// key it sent no block for is a miss. A line other than END (a leader that
// no longer leads one of the keys refuses the whole line, "SERVER_ERROR not
// my vbucket ... led by node NAME", after answering the keys before it, and
// closes the connection) settles the keys up to the last block it sent;
// the others, and every key of a node that could not be reached (nothing
// was sent), are asked alone at their turn (forwardGet), which follows
// Route.Reroute as a single get does. A batch that broke off once sent (the
// connection failed, the node went down: Route.Gone) answers its unsettled
// keys as a single get would, a SERVER_ERROR at the first of them.

// fwdBatchKeys is the most remote keys one round of a multi-get's batches
// gathers: it bounds the values a connection holds ahead of its answer
// (each at most MaxItemSize). A multi-get with more makes a round per
// fwdBatchKeys.
const fwdBatchKeys = 128

// aheadState is where a remote key of a multi-get stands.
type aheadState uint8

const (
	// aheadNone: not asked yet.
	aheadNone aheadState = iota
	// aheadDone: its node answered it: doc, nil for a miss.
	aheadDone
	// aheadAlone: its node refused the batch or could not be reached: it
	// is asked alone at its turn (forwardGet, which reroutes).
	aheadAlone
	// aheadFailed: its batch broke off once sent: it answers
	// forwardFailed(rt, err), and the connection closes.
	aheadFailed
)

// aheadAnswer is a multi-get's remote key as its batch left it.
type aheadAnswer struct {
	state aheadState
	doc   *engine.Document
	rt    Route
	err   error
}

// fwdBatch is the keys of a multi-get sent to one node in one command.
type fwdBatch struct {
	rt  Route
	pos []int  // the keys' positions in the command, ascending
	req []byte // the command, without its "\r\n" until it is sent
}

// retrievalPrefix is the start of cmd's retrieval line as sent to a
// leader: its kind, and the expiry of a gat or gats.
func retrievalPrefix(cmd *command) []byte {
	b := append([]byte(cmd.kind.String()), ' ')
	if cmd.kind == cmdGat || cmd.kind == cmdGats {
		b = strconv.AppendInt(b, cmd.exptime, 10)
		b = append(b, ' ')
	}
	return b
}

// fetchAhead asks the nodes leading the keys of cmd from position from on
// (whose route is first) for them, one command a node, all at once, and
// keeps their answers in c.ahead. The keys this node leads, those answered
// or tried already and those past the round's bound are left alone.
func (c *session) fetchAhead(ctx context.Context, cmd *command, from int, first Route) {
	if c.ahead == nil {
		c.ahead = make([]aheadAnswer, len(cmd.keys))
	}
	prefix := retrievalPrefix(cmd)
	// The leader's line limit is taken to be this node's: a cluster's
	// nodes serve the same bucket, alike.
	limit := c.s.opts.MaxGetLineLen
	var batches []*fwdBatch
	byAddr := map[string]*fwdBatch{}
	for j, n := from, 0; j < len(cmd.keys) && n < fwdBatchKeys; j++ {
		if c.ahead[j].state != aheadNone {
			continue
		}
		key := cmd.keys[j]
		rt := first
		if j != from {
			var reply string
			var remote bool
			if rt, reply, remote = c.routeOf(ctx, key); !remote || reply != "" {
				continue // carried out here, or refused: at its turn
			}
		}
		b := byAddr[rt.Addr]
		if b == nil {
			b = &fwdBatch{rt: rt, req: append([]byte(nil), prefix...)}
			byAddr[rt.Addr] = b
			batches = append(batches, b)
		}
		if len(b.pos) > 0 && len(b.req)+1+len(key)+2 > limit {
			continue // the node's line is full: a later round
		}
		if len(b.pos) > 0 {
			b.req = append(b.req, ' ')
		}
		b.req = append(b.req, key...)
		b.pos = append(b.pos, j)
		n++
	}
	if len(batches) == 1 {
		c.s.runBatch(ctx, batches[0], cmd.keys, c.ahead)
		return
	}
	var wg sync.WaitGroup
	for _, b := range batches {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.s.runBatch(ctx, b, cmd.keys, c.ahead)
		}()
	}
	wg.Wait()
}

// runBatch sends b to its node and sets what it answered in ahead, at b's
// positions only (the batches of a round run together).
func (s *Server) runBatch(ctx context.Context, b *fwdBatch, keys []string, ahead []aheadAnswer) {
	p := 0 // b.pos's index of the next key an answer may be for
	line, err := s.forwardOnce(ctx, b.rt, append(b.req, '\r', '\n'), func(k string, v *fwdValue) error {
		for ; p < len(b.pos); p++ {
			if j := b.pos[p]; keys[j] == k {
				ahead[j].doc = &engine.Document{Key: k, Value: v.value, Flags: v.flags, CAS: v.cas}
				p++
				return nil
			}
		}
		return fmt.Errorf("a value of key %q, not asked for or out of order", k)
	})
	settled, rest := len(b.pos), aheadDone
	switch {
	case err != nil && errors.Is(err, errNotSent):
		settled, rest = 0, aheadAlone
	case err != nil:
		settled, rest = p, aheadFailed
	case line != replyEnd:
		settled, rest = p, aheadAlone
	}
	if rest == aheadAlone {
		s.log.Debug("memcache: a multi-get's keys asked of a node one at a time", "node", b.rt.Node, "addr", b.rt.Addr, "keys", len(b.pos)-settled, "reply", line, "err", err)
	}
	for q, j := range b.pos {
		a := &ahead[j]
		if q < settled {
			a.state = aheadDone
			continue
		}
		*a = aheadAnswer{state: rest, rt: b.rt, err: err}
	}
}

// fromAhead answers key i of the multi-get being answered from what its
// batch fetched: done when that answered it (a value, or a miss), reply
// when it failed (a SERVER_ERROR, after which the connection closes);
// neither when the key has no batch answer (not asked yet, or to be asked
// alone).
func (c *session) fromAhead(w replyWriter, i int, key string, withCAS bool) (done bool, reply string) {
	if i >= len(c.ahead) {
		return false, ""
	}
	switch a := &c.ahead[i]; a.state {
	case aheadDone:
		if a.doc != nil {
			c.writeValue(w, key, a.doc, withCAS)
		}
		return true, ""
	case aheadFailed:
		return false, c.s.forwardFailed(a.rt, a.err)
	}
	return false, ""
}

// aheadAt is key i's state in the multi-get being answered.
func (c *session) aheadAt(i int) aheadState {
	if i >= len(c.ahead) {
		return aheadNone
	}
	return c.ahead[i].state
}
