package crashtest

import (
	"fmt"
	"strings"
	"sync"
	"time"
)

// docValue is what the writers store: {"g":G,"n":N,"w":W,"pad":P}. W is
// unique per write, so equal values mean the same write. P is crashPad: it
// makes the values large enough that the bucket's tiny quota ejects them,
// and a value read back from disk must bring all of it.
type docValue struct {
	G   int    `json:"g"`
	N   int    `json:"n"`
	W   int64  `json:"w"`
	Pad string `json:"pad"`
}

// crashPad pads every value written (see docValue).
var crashPad = strings.Repeat("p", 600)

// state is a key's document as the harness expects it.
type state struct {
	present bool
	val     docValue
	exp     int64 // absolute Unix seconds, 0 = none
	// expSlack is how far the real expiration may differ from exp: 0 when
	// the server told exp, more when it was predicted for an unanswered op.
	expSlack int64
}

func (s state) String() string {
	if !s.present {
		return "absent"
	}
	return fmt.Sprintf("{g:%d n:%d w:%d exp:%d±%d}", s.val.G, s.val.N, s.val.W, s.exp, s.expSlack)
}

// mayBeExpired reports whether s may have expired by now (Unix seconds).
func (s state) mayBeExpired(now int64) bool {
	return s.present && s.exp != 0 && s.exp-s.expSlack <= now+1
}

// opKind is a writer's operation.
type opKind int

const (
	opUpsert opKind = iota
	opDelete
	opTouch
)

func (k opKind) String() string {
	return [...]string{"upsert", "delete", "touch"}[k]
}

// op is one operation, kept while it is in flight.
type op struct {
	kind   opKind
	val    docValue // upsert
	expiry int64    // upsert, touch: relative seconds (0 none)
	sent   int64    // Unix seconds when sent
}

// apply predicts the state after o, from s.
func (o op) apply(s state) state {
	predictExp := func() (int64, int64) {
		if o.expiry == 0 {
			return 0, 0
		}
		return o.sent + o.expiry, 2
	}
	switch o.kind {
	case opUpsert:
		exp, slack := predictExp()
		return state{present: true, val: o.val, exp: exp, expSlack: slack}
	case opDelete:
		return state{}
	default: // touch
		if !s.present {
			return s
		}
		exp, slack := predictExp()
		s.exp, s.expSlack = exp, slack
		return s
	}
}

// keyRecord is what the harness knows about one key.
type keyRecord struct {
	cur      state    // after the last acknowledged op (or as last observed)
	base     state    // as observed at the last check
	acks     []ackRec // the ops acknowledged since the last check, in order
	acked    bool     // an op on this key was acknowledged since the last check
	lastOp   string
	inflight *op // sent but not answered
	history  []sentOp
}

// ackRec is the state an acknowledged op left, and when its answer came.
type ackRec struct {
	s  state
	at time.Time
}

// lossWithin reports whether obs, read at now, is the state of the key
// before its last n acknowledged ops, all of which were acknowledged at or
// after since (writes a kill may take back at durability none or majority):
// it returns n, or 0 when obs is no such state.
func (r *keyRecord) lossWithin(obs state, now int64, since time.Time) int {
	for j := len(r.acks) - 1; j >= 0; j-- {
		if r.acks[j].at.Before(since) {
			return 0 // an older write lost: beyond what the level allows
		}
		prev := r.base
		if j > 0 {
			prev = r.acks[j-1].s
		}
		if matches(prev, obs, now) {
			return len(r.acks) - j
		}
	}
	return 0
}

// sentOp is an op in a key's recent history, to explain a mismatch.
type sentOp struct {
	op
	round int
	acked bool
}

// historyLen is how many ops of a key are remembered.
const historyLen = 12

// model holds every key's record. A key belongs to one writer lane, so only
// that lane changes it during a round; the mutex guards the map's records
// against the checker reading them after the round.
type model struct {
	mu   sync.Mutex
	keys []keyRecord
}

func newModel(n int) *model { return &model{keys: make([]keyRecord, n)} }

func keyName(i int) string { return fmt.Sprintf("k%05d", i) }

func (m *model) begin(i int, o op, round int) {
	m.mu.Lock()
	r := &m.keys[i]
	r.inflight = &o
	if len(r.history) == historyLen {
		r.history = append(r.history[:0], r.history[1:]...)
	}
	r.history = append(r.history, sentOp{op: o, round: round})
	m.mu.Unlock()
}

// ack records an acknowledged op and the state it produced.
func (m *model) ack(i int, o op, s state) {
	m.mu.Lock()
	r := &m.keys[i]
	r.cur, r.acked, r.inflight = s, true, nil
	r.acks = append(r.acks, ackRec{s: s, at: time.Now()})
	r.lastOp = o.kind.String()
	if n := len(r.history); n > 0 {
		r.history[n-1].acked = true
	}
	m.mu.Unlock()
}

// observe records that a write answered 404 found the key absent: its
// state from then on. Unlike reset it keeps the writes acknowledged since
// the last check, which a kill may still take back at durability none or
// majority (the key may then read as it was before them).
func (m *model) observe(i int, s state) {
	m.mu.Lock()
	r := &m.keys[i]
	r.cur, r.inflight = s, nil
	r.acks = append(r.acks, ackRec{s: s, at: time.Now()})
	m.mu.Unlock()
}

// settle clears the in-flight op of an op that certainly had no effect.
func (m *model) settle(i int) {
	m.mu.Lock()
	m.keys[i].inflight = nil
	m.mu.Unlock()
}

func (m *model) get(i int) keyRecord {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.keys[i]
}

// reset sets a key to what was observed after a restart.
func (m *model) reset(i int, s state) {
	m.mu.Lock()
	m.keys[i] = keyRecord{cur: s, base: s, history: m.keys[i].history}
	m.mu.Unlock()
}

// explain says which recent write of key i stored g and n, if any.
func (m *model) explain(i, g, n int) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.keys[i].history
	for j := len(h) - 1; j >= 0; j-- {
		o := h[j]
		if o.kind == opUpsert && o.val.G == g && o.val.N == n {
			how := "acknowledged"
			if !o.acked {
				how = "NOT acknowledged (in flight at a kill, or failed)"
			}
			later := len(h) - 1 - j
			return fmt.Sprintf("= upsert w=%d of round %d, %s, followed by %d later op(s)", o.val.W, o.round, how, later)
		}
	}
	return "= no recent upsert of this key"
}
