package changes

import (
	"github.com/mayflydb/mayfly/engine"
)

// reader reads a bucket's feed from a position, one window (cas, win] at a
// time, partition by partition in sequence order. It holds at most one chunk
// of documents: the feed is never materialised.
type reader struct {
	b     *engine.Bucket
	keep  func(*engine.Document) bool
	chunk int
	pos   position

	// Inside a window: the chunk being handed out and the scan it came
	// from (scan.After is where the next chunk starts in pos.part).
	buf  []*engine.Document
	bi   int
	scan engine.ChangeScan

	// start is, per partition, where the next window's scan starts: every
	// version after it with a CAS over the current window's top was
	// stamped after it. later collects it while a window is read; zeros
	// (the start of the partition) are always safe.
	start, later []uint64

	// read counts the documents taken from the bucket.
	read int64
}

func newReader(b *engine.Bucket, pos position, keep func(*engine.Document) bool, chunk int) *reader {
	n := b.NumPartitions()
	r := &reader{b: b, keep: keep, chunk: chunk, pos: pos, start: make([]uint64, n), later: make([]uint64, n)}
	if pos.win > pos.cas {
		r.enter(pos.part, pos.seq)
	}
	return r
}

// open starts the window (pos.cas, top] unless a window is open already or
// top is not past pos.cas; it reports whether a window is open.
func (r *reader) open(top uint64) bool {
	if r.pos.win > r.pos.cas {
		return true
	}
	if top <= r.pos.cas {
		return false
	}
	r.pos.win = top
	r.enter(0, r.start[0])
	return true
}

// enter starts reading partition part of the open window after seq.
func (r *reader) enter(part int, seq uint64) {
	r.pos.part, r.pos.seq = part, seq
	r.buf, r.bi = r.buf[:0], 0
	r.scan = engine.ChangeScan{Part: part, After: seq, Lo: r.pos.cas, Hi: r.pos.win, Limit: r.chunk, Keep: r.keep, Docs: r.buf, More: true}
}

// next returns the next document of the open window, with r.pos just past
// it, or nil when no window is open or the open one is finished (r.pos then
// at its top).
func (r *reader) next() *engine.Document {
	for r.pos.win > r.pos.cas {
		if r.bi < len(r.buf) {
			d := r.buf[r.bi]
			r.buf[r.bi] = nil
			r.bi++
			r.pos.seq = d.Seq
			return d
		}
		if r.scan.More {
			r.scan.Docs = r.scan.Docs[:0]
			r.b.ScanChanges(&r.scan)
			r.buf, r.bi = r.scan.Docs, 0
			r.read += int64(len(r.buf))
			continue
		}
		// The partition is done in this window.
		if r.scan.Above != 0 {
			r.later[r.pos.part] = r.scan.Above - 1
		} else {
			r.later[r.pos.part] = r.scan.After
		}
		if r.pos.part+1 < len(r.start) {
			r.enter(r.pos.part+1, r.start[r.pos.part+1])
			continue
		}
		r.start, r.later = r.later, r.start
		clear(r.later)
		r.pos = position{uuid: r.pos.uuid, cas: r.pos.win}
		r.buf, r.bi = r.buf[:0], 0
	}
	return nil
}
