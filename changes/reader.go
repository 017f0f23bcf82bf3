package changes

import (
	"math"

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

	// parts is the bucket's number of partitions.
	parts int
	// ahead holds, for the open window, where the read of each partition
	// not entered yet goes on: a backfill read it with an earlier one
	// (engine.ChangeScan.ReadAhead); nil when none did.
	ahead []uint64

	// read counts the documents taken from the bucket.
	read int64

	// left is how many more documents the reader's caller takes at most
	// (math.MaxInt for no limit): a backfill reads ahead only what it can
	// hand out whole (engine.ChangeScan.ReadAhead).
	left int

	// metaOnly says the reader's documents need no value (see
	// engine.ChangeScan.MetaOnly).
	metaOnly bool
	// single keeps the reader in its partition: next returns nil at the
	// partition's end in the open window instead of going on to the next
	// one, and a backfill reads no later partition ahead (a reverse walk
	// reads one partition at a time: reverse.go).
	single bool
	// err is why next stopped before the window's end: a value the bucket
	// could not read back from its store.
	err error
}

func newReader(b *engine.Bucket, pos position, keep func(*engine.Document) bool, chunk, limit int, metaOnly bool) *reader {
	n := b.NumPartitions()
	if limit <= 0 {
		limit = math.MaxInt
	}
	r := &reader{b: b, keep: keep, chunk: chunk, pos: pos, parts: n, left: limit, metaOnly: metaOnly}
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
	r.ahead = nil
	r.enter(0, 0)
	return true
}

// enter starts reading partition part of the open window after seq.
func (r *reader) enter(part int, seq uint64) {
	if part != r.pos.part || seq != r.pos.seq {
		r.pos.bf = engine.BackfillPoint{} // a backfill point belongs to the position it was taken at
	}
	r.pos.part, r.pos.seq = part, seq
	r.buf, r.bi = r.buf[:0], 0
	r.scan = engine.ChangeScan{Part: part, After: seq, Lo: r.pos.cas, Hi: r.pos.win, Limit: r.chunk, Keep: r.keep, Docs: r.buf, More: true, MetaOnly: r.metaOnly, Resume: r.pos.bf}
}

// aheadOf returns where the read of partition part of the open window
// starts: after what a backfill read ahead of it holds, else from 0.
func (r *reader) aheadOf(part int) uint64 {
	if part < len(r.ahead) {
		return r.ahead[part]
	}
	return 0
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
			r.left = max(r.left-1, 1)
			if r.scan.Backfill {
				// Inside a backfill, in key order, the position stays
				// where it began (engine.ChangeScan.Backfill) and
				// names the last document taken, so that a reader
				// from it goes on after that document.
				r.pos.bf = engine.BackfillPoint{End: r.scan.Snapshot, Collection: d.Collection, Key: d.Key}
			} else {
				r.pos.seq, r.pos.bf = d.Seq, engine.BackfillPoint{}
			}
			return d
		}
		if r.scan.More {
			r.scan.Docs = r.scan.Docs[:0]
			r.scan.ReadAhead = r.left
			if r.single {
				r.scan.ReadAhead = 0
			}
			r.b.ScanChanges(&r.scan)
			if r.scan.Ahead != nil {
				// The backfill that ended read the later partitions'
				// stored versions too (their rows came in it): each
				// goes on from its snapshot's end.
				if r.ahead == nil {
					r.ahead = make([]uint64, r.parts)
				}
				for p, seq := range r.scan.Ahead {
					r.ahead[p] = max(r.ahead[p], seq)
				}
			}
			if r.scan.Err != nil {
				r.err = r.scan.Err
				return nil // the window stays open where it stopped
			}
			r.buf, r.bi = r.scan.Docs, 0
			r.read += int64(len(r.buf))
			continue
		}
		// The partition is done in this window.
		if r.single {
			return nil
		}
		if r.pos.part+1 < r.parts {
			r.enter(r.pos.part+1, r.aheadOf(r.pos.part+1))
			continue
		}
		r.pos = position{uuid: r.pos.uuid, cas: r.pos.win}
		r.buf, r.bi = r.buf[:0], 0
	}
	return nil
}
