package memcache

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
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
// key it sent no block for is a miss. A leader that no longer leads one of
// the keys refuses the whole line at it, after answering the keys before
// it, and closes the connection: "SERVER_ERROR not my vbucket: key "K"'s
// partition is led by node NAME; ...", followed by the later keys of the
// line it does not lead either, each with its leader as it knows it
// (fwdOthersMark, refusalNaming). That settles the keys up to K (those
// without a block are misses), and the others are batched again, together
// with those of the round's other refused batches (rebatch): K and each
// key the refusal listed at the leader named (through the key's
// Route.Reroute, which the router remembers for the partition), each
// unlisted one at the node that refused (it leads it, by its own
// account). The keys of a node that could not be reached (nothing was
// sent) are batched again where each one's Reroute sends it. A round of batches again may meet
// refusals in turn; after fwdRetryRounds of them (a map in flux) the keys
// left are asked alone at their turn (forwardGet), which follows
// Route.Reroute as a single get does; so are the keys of a refusal that
// names no key (a line of another wording: a read barrier's, say). A
// batch that broke off once sent (the connection failed, the node went
// down: Route.Gone) answers its unsettled keys as a single get would, a
// SERVER_ERROR at the first of them, which ends the multi-get: the
// connection serves on when none of its VALUE blocks was written before
// that key, and closes when some were (session.getFailed says why).

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
	// aheadAlone: its node refused the batch or could not be reached, and
	// no batch asked it again: it is asked alone at its turn (forwardGet,
	// which reroutes).
	aheadAlone
	// aheadFailed: its batch broke off once sent: it answers
	// forwardFailed(rt, err), which ends the multi-get (getFailed).
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
	pos []int   // the keys' positions in the command, ascending
	rts []Route // each key's route (to rt's node), by pos's index
	req []byte  // the command, without its "\r\n" until it is sent
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
// or tried already and those past the round's bound are left alone. The
// keys of a batch a node refused (naming the leader of the key it refused
// at) or could not be reached for are asked again together, grouped by the
// node they go to now (rebatch), up to fwdRetryRounds times.
func (c *session) fetchAhead(ctx context.Context, cmd *command, from int, first Route) {
	if c.ahead == nil {
		c.ahead = make([]aheadAnswer, len(cmd.keys))
	}
	g := c.newBatcher(cmd)
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
		if g.add(rt, j, key) {
			n++
		}
	}
	for round := 0; ; round++ {
		redos := c.s.runBatches(ctx, g.batches, cmd.keys, c.ahead)
		if len(redos) == 0 {
			return
		}
		if round == fwdRetryRounds || c.s.opts.private.noRebatch {
			// The bound met (a map in flux), or the baseline's path: the
			// keys left stay aheadAlone, each asked alone at its turn
			// (forwardGet, which reroutes).
			c.s.log.Debug("memcache: a multi-get's keys asked of their nodes one at a time", "keys", redoKeys(redos), "rounds", round+1)
			return
		}
		g = c.newBatcher(cmd)
		c.rebatch(ctx, cmd, g, redos)
	}
}

// fwdRetryRounds bounds how many times a multi-get's keys whose batch was
// refused or not sent are batched again (rebatch): a key is sent in at
// most 1+fwdRetryRounds batches, then alone (forwardGet). A map in flux
// (a named leader that lost the partition in turn) cannot loop.
const fwdRetryRounds = 2

// batcher gathers a round's batches, one a node.
type batcher struct {
	prefix  []byte
	limit   int
	batches []*fwdBatch
	byAddr  map[string]*fwdBatch
}

// newBatcher returns an empty round of cmd's batches.
func (c *session) newBatcher(cmd *command) *batcher {
	// The leader's line limit is taken to be this node's: a cluster's
	// nodes serve the same bucket, alike.
	return &batcher{prefix: retrievalPrefix(cmd), limit: c.s.opts.MaxGetLineLen, byAddr: map[string]*fwdBatch{}}
}

// add puts key (position j, above every position added before) in the
// batch of rt's node; false when that node's line is full (the key is
// left for later).
func (g *batcher) add(rt Route, j int, key string) bool {
	b := g.byAddr[rt.Addr]
	if b == nil {
		b = &fwdBatch{rt: rt, req: append([]byte(nil), g.prefix...)}
		g.byAddr[rt.Addr] = b
		g.batches = append(g.batches, b)
	}
	if len(b.pos) > 0 && len(b.req)+1+len(key)+2 > g.limit {
		return false
	}
	if len(b.pos) > 0 {
		b.req = append(b.req, ' ')
	}
	b.req = append(b.req, key...)
	b.pos = append(b.pos, j)
	b.rts = append(b.rts, rt)
	return true
}

// runBatches runs a round's batches, together, and returns what each left
// to ask again.
func (s *Server) runBatches(ctx context.Context, batches []*fwdBatch, keys []string, ahead []aheadAnswer) []*fwdRedo {
	redos := make([]*fwdRedo, len(batches))
	if len(batches) == 1 {
		redos[0] = s.runBatch(ctx, batches[0], keys, ahead)
	} else {
		var wg sync.WaitGroup
		for i, b := range batches {
			wg.Go(func() { redos[i] = s.runBatch(ctx, b, keys, ahead) })
		}
		wg.Wait()
	}
	return slices.DeleteFunc(redos, func(r *fwdRedo) bool { return r == nil })
}

// fwdRedo is the keys of a batch to ask again: its node refused it (from
// the key it named on), or could not be reached (unreachable, all of
// them). They are aheadAlone until rebatch places them.
type fwdRedo struct {
	pos         []int
	rts         []Route // each key's route in the batch, by pos's index
	unreachable bool
	// named holds the leader the refusal names for a key: the key it
	// refused at and the later ones it said it does not lead.
	named map[string]string
}

// redoKeys is how many keys redos hold.
func redoKeys(redos []*fwdRedo) int {
	n := 0
	for _, r := range redos {
		n += len(r.pos)
	}
	return n
}

// runBatch sends b to its node and sets what it answered in ahead, at b's
// positions only (the batches of a round run together); it returns the
// keys to ask again, if any.
func (s *Server) runBatch(ctx context.Context, b *fwdBatch, keys []string, ahead []aheadAnswer) *fwdRedo {
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
	var redo *fwdRedo
	switch {
	case err != nil && errors.Is(err, errNotSent):
		settled, rest = 0, aheadAlone
		redo = &fwdRedo{pos: b.pos, rts: b.rts, unreachable: true}
	case err != nil:
		settled, rest = p, aheadFailed
	case line != replyEnd:
		settled, rest = p, aheadAlone
		// The node answered the keys before the one it refused at: those
		// it sent no value for are misses.
		if refused, named := parseRefusal(line); refused != "" {
			for q := p; q < len(b.pos); q++ {
				if keys[b.pos[q]] == refused {
					settled = q
					redo = &fwdRedo{pos: b.pos[q:], rts: b.rts[q:], named: named}
					break
				}
			}
		}
	}
	if rest == aheadAlone {
		s.log.Debug("memcache: a multi-get's batch refused or not sent", "node", b.rt.Node, "addr", b.rt.Addr, "keys", len(b.pos)-settled, "again", redo != nil, "reply", line, "err", err)
	}
	for q, j := range b.pos {
		a := &ahead[j]
		if q < settled {
			a.state = aheadDone
			continue
		}
		*a = aheadAnswer{state: rest, rt: b.rt, err: err}
	}
	return redo
}

// rebatch puts the keys the redos hold in g's batches, in the keys' order,
// each where it goes now: when its node refused the batch, at the leader
// the refusal named for it, or at that node again when it named none (it
// leads the key, by its own account); when its node could not be reached,
// where the route's Reroute sends it instead (the router routes it again,
// avoiding that node). The leader named is asked of the key's route too
// (Route.Reroute: the router remembers it for the key's partition, and
// gives its address). A key with nowhere to go (no Reroute, or it
// declines), or whose node's line is full, stays aheadAlone: asked alone
// at its turn.
func (c *session) rebatch(ctx context.Context, cmd *command, g *batcher, redos []*fwdRedo) {
	type left struct {
		j  int
		rt Route
		r  *fwdRedo
	}
	var all []left
	for _, r := range redos {
		for q, j := range r.pos {
			all = append(all, left{j, r.rts[q], r})
		}
	}
	slices.SortFunc(all, func(a, b left) int { return a.j - b.j })
	for _, l := range all {
		key, rt := cmd.keys[l.j], l.rt
		if named, ok := l.r.named[key]; ok || l.r.unreachable {
			if rt.Reroute == nil {
				continue
			}
			next, ok := rt.Reroute(ctx, named)
			if !ok || next.Addr == "" {
				continue
			}
			rt = next
		}
		g.add(rt, l.j, key)
	}
}

// fwdOthersMark starts the list a forwarded multi-get's refusal carries
// after its reason: the later keys of the line this node does not lead
// either, each as KEY@NODE, NODE the leader it knows (see refusalNaming).
const fwdOthersMark = "; of the keys after it, led elsewhere:"

// refusalNaming is the refusal reply of a forwarded multi-get at a key
// this node does not lead, with, when it names the key's leader, the
// leaders of the keys after it (rest) that this node does not lead
// either: the forwarding node then asks each leader for its keys in one
// command (rebatch), rather than each key of them alone.
func (c *session) refusalNaming(ctx context.Context, reply string, rest []string) string {
	if refusalLeader(reply) == "" {
		return reply
	}
	b := []byte(reply)
	mark := false
	for _, k := range rest {
		rt, err := c.s.opts.Route(ctx, k)
		if err != nil || rt.Addr == "" || !nodeName(rt.Node) {
			continue // led here, or not known: asked here again
		}
		if !mark {
			b = append(b, fwdOthersMark...)
			mark = true
		}
		b = append(append(append(append(b, ' '), k...), '@'), rt.Node...)
	}
	return string(b)
}

// parseRefusal reads a forwarded multi-get's refusal: the key it refused
// at (its leader named) and the leader it named for each key, that one's
// and those of the list after it (fwdOthersMark); refused is "" when the
// line names no key's leader.
func parseRefusal(line string) (refused string, named map[string]string) {
	leader := refusalLeader(line)
	i := strings.Index(line, `key "`)
	if leader == "" || i < 0 {
		return "", nil
	}
	q, err := strconv.QuotedPrefix(line[i+len("key "):])
	if err != nil {
		return "", nil
	}
	if refused, err = strconv.Unquote(q); err != nil || refused == "" {
		return "", nil
	}
	named = map[string]string{refused: leader}
	if m := strings.LastIndex(line, fwdOthersMark); m >= 0 {
		for _, f := range strings.Fields(line[m+len(fwdOthersMark):]) {
			at := strings.LastIndexByte(f, '@')
			if at <= 0 || !nodeName(f[at+1:]) {
				continue
			}
			if _, ok := named[f[:at]]; !ok {
				named[f[:at]] = f[at+1:]
			}
		}
	}
	return refused, named
}

// fromAhead answers key i of the multi-get being answered from what its
// batch fetched: done when that answered it (a value, or a miss), reply
// when it failed (a SERVER_ERROR, which ends the multi-get: getFailed);
// neither when the key has no batch answer (not asked yet, or to be asked
// alone).
func (c *session) fromAhead(w replyWriter, i int, key string, withCAS, touch bool) (done bool, reply string) {
	if i >= len(c.ahead) {
		return false, ""
	}
	switch a := &c.ahead[i]; a.state {
	case aheadDone:
		c.s.countForwardedRead(touch, a.doc != nil)
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
