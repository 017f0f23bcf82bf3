package index

import (
	"context"
	"time"
)

// A background write-back (WriteBackPaced) runs in slices of about
// paceSlice of work, each followed by a pause of paceRest times the work it
// did (bounded by paceMaxRest), so that it takes at most about half of a
// processor while it lasts, in turns short enough for a request to wait
// out, and leaves the rest to the process's foreground work: a view build's
// last write-back, run at full speed when the feed goes quiet, took one of
// a 2-core server's processors for seconds and its allocations kept the
// collector on the other, and the random gets served meanwhile waited for
// a processor (BENCHMARKS.md, "Cold gets at 5,000,000 × 1 KiB (issue 19):
// where the p99 goes").
const (
	paceSlice   = time.Millisecond
	paceRest    = 1
	paceMaxRest = 50 * time.Millisecond
)

// pacer spaces a background write-back's work (see paceSlice). A nil
// pacer, or one whose pacing ended, never pauses. Its work is measured on
// the wall clock, so time the write-back spent waiting for a processor
// counts as work: a busy machine slows it less than its share would.
type pacer struct {
	ctx   context.Context
	slice time.Duration // of work between pauses
	hurry func() bool   // reports whether the write-back should finish at full speed
	start time.Time     // of the current slice
	off   bool          // pacing ended: ctx ended or hurry reported true

	// Figures of the write-back, for tests and benchmarks.
	pauses  int
	rested  time.Duration
	hurried bool // pacing ended by hurry
}

// newPacer returns a pacer of slices of slice (0: paceSlice) whose pacing
// ends when ctx ends or when hurry (nil: never) returns true, asked
// before each pause.
func newPacer(ctx context.Context, hurry func() bool, slice time.Duration) *pacer {
	if slice <= 0 {
		slice = paceSlice
	}
	return &pacer{ctx: ctx, hurry: hurry, slice: slice, start: time.Now()} // wall clock: pacing is real time, not the expiry clock
}

// tick is called between the write-back's steps: once the current slice
// has lasted paceSlice, it pauses (unless pacing ended) and starts the
// next slice.
func (p *pacer) tick() {
	if p == nil || p.off {
		return
	}
	worked := time.Since(p.start)
	if worked < p.slice {
		return
	}
	if p.ctx.Err() != nil {
		p.off = true
		return
	}
	if p.hurry != nil && p.hurry() {
		p.off, p.hurried = true, true
		return
	}
	rest := min(worked*paceRest, paceMaxRest)
	t := time.NewTimer(rest)
	select {
	case <-t.C:
	case <-p.ctx.Done():
		t.Stop()
		p.off = true
	}
	p.pauses++
	p.rested += rest
	p.start = time.Now() // wall clock: pacing is real time, not the expiry clock
}
