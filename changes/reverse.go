package changes

import (
	"context"

	"github.com/mayflydb/mayfly/engine"
)

// reverseMarks caps how many places in a partition one pass of a reverse
// walk keeps (see revWalk): with 128 rows a chunk, a partition of up to
// 32,768 rows needs one pass to find its chunks, and each further level of
// 256 places multiplies that by 256.
const reverseMarks = 256

// revWalk reads the window (0, top] of a bucket's feed backwards: the rows
// a forward read from 0 gives, in the opposite order (partition by
// partition from the last, each from its newest change), each with the seq
// the forward read gives it. The engine reads a partition's changes only
// forwards, so a partition is read in segments: a pass (without values)
// marks where every stride rows begin, then the segments are read from the
// last to the first, a segment of a chunk or less whole and reversed in
// memory, a longer one by marking it again, stride smaller. It never holds
// more than a chunk of documents and reverseMarks places per level: a
// partition of n rows costs about log(n/chunk)/log(reverseMarks)+1 passes
// over it, and a limited walk reads only the partitions it gets to.
type revWalk struct {
	f     *Feed
	top   uint64
	marks int // the cap on places per pass (reverseMarks)

	read int64 // documents taken from the bucket
	// held and peak count the places and documents held now and at most
	// (for tests of the memory bound).
	held, peak int
}

// segment is a run of rows in one partition's window: where a forward
// read of it starts, how many rows it has, and the partition sequence
// number of its last row when that row came from the change log (0 when it
// came from a backfill): a row of the log past it belongs to a later
// segment (a document rewritten meanwhile left this one).
type segment struct {
	from  position
	n     int
	bound uint64
}

// partition emits the rows of partition part, newest first, calling emit
// for each with its position (its seq); it stops early, reporting false,
// when emit returns false.
func (w *revWalk) partition(ctx context.Context, part int, emit func(*revRow) (bool, error)) (bool, error) {
	from := position{uuid: w.f.b.UUID(), win: w.top, part: part}
	return w.segment(ctx, segment{from: from, n: -1}, emit)
}

// revRow is a row of a reverse walk: the document and the position just
// past it in the forward order.
type revRow struct {
	d   *engine.Document
	pos position
}

// reader returns a reader of one partition's window from pos.
func (w *revWalk) reader(pos position, metaOnly bool) *reader {
	r := newReader(w.f.b, pos, w.f.keep, chunkSize, 0, metaOnly)
	r.single = true
	return r
}

func (w *revWalk) hold(n int) {
	w.held += n
	w.peak = max(w.peak, w.held)
}

// segment emits s's rows (all the partition's from s.from when s.n < 0),
// newest first.
func (w *revWalk) segment(ctx context.Context, s segment, emit func(*revRow) (bool, error)) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if s.n >= 0 && s.n <= chunkSize {
		return w.leaf(s, emit)
	}
	// A pass without values marks where each stride rows begin.
	r := w.reader(s.from, true)
	stride := chunkSize
	if s.n > 0 {
		stride = max(chunkSize, (s.n+w.marks-1)/w.marks)
	}
	var marks []segment
	cur := segment{from: s.from}
	for left := s.n; left != 0; {
		d := r.next()
		if d == nil {
			break
		}
		inLog := r.pos.bf.End == 0
		if s.bound > 0 && inLog && d.Seq > s.bound {
			break
		}
		if left > 0 {
			left--
		}
		cur.n++
		cur.bound = 0
		if inLog {
			cur.bound = d.Seq
		}
		if cur.n == stride {
			marks = append(marks, cur)
			w.hold(1)
			cur = segment{from: r.pos}
			if len(marks) > w.marks {
				// Too many places: keep every other one, each
				// segment twice as long.
				for i := 0; i < len(marks); i += 2 {
					m := marks[i]
					if i+1 < len(marks) {
						m.n += marks[i+1].n
						m.bound = marks[i+1].bound
					}
					marks[i/2] = m
				}
				w.hold(-(len(marks) - (len(marks)+1)/2))
				marks = marks[:(len(marks)+1)/2]
				stride *= 2
			}
		}
	}
	w.read += r.read
	if r.err != nil {
		w.hold(-len(marks))
		return false, r.err
	}
	if cur.n > 0 {
		marks = append(marks, cur)
		w.hold(1)
	}
	defer func(n int) { w.hold(-n) }(len(marks))
	for i := len(marks) - 1; i >= 0; i-- {
		if more, err := w.segment(ctx, marks[i], emit); !more || err != nil {
			return false, err
		}
	}
	return true, nil
}

// leaf emits a segment of at most a chunk of rows: read whole (with the
// values the feed sends), then handed out last first.
func (w *revWalk) leaf(s segment, emit func(*revRow) (bool, error)) (bool, error) {
	r := w.reader(s.from, !w.f.req.IncludeDocs)
	rows := make([]revRow, 0, s.n)
	for len(rows) < s.n {
		d := r.next()
		if d == nil {
			break
		}
		if s.bound > 0 && r.pos.bf.End == 0 && d.Seq > s.bound {
			break
		}
		rows = append(rows, revRow{d: d, pos: r.pos})
	}
	w.read += r.read
	if r.err != nil {
		return false, r.err
	}
	w.hold(len(rows))
	defer w.hold(-len(rows))
	for i := len(rows) - 1; i >= 0; i-- {
		if more, err := emit(&rows[i]); !more || err != nil {
			return false, err
		}
	}
	return true, nil
}
