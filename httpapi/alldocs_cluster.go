package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"

	"github.com/mayflydb/mayfly/changes"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/internal/jsonstr"
	"github.com/mayflydb/mayfly/views"
)

// _all_docs on a cluster node. A node holds the copies of some partitions
// only (with four nodes or more, three quarters of them), so a listing
// made of one node's documents would miss the others'. As a view query
// does ("Views across nodes" in docs/ARCHITECTURE.md), the node asked
// (the merger) reads the view coverage, which gives each partition to
// exactly one node, and asks each coverer for its share: the listing's
// documents of its partitions, at most skip+limit of them in key order
// (the first skip+limit of the whole listing are among each node's first
// skip+limit), or, for keys, the rows of the keys in its partitions with
// their positions; with the share's total_rows (engine.Collection.CountIn).
// The merger sorts the rows by key (a document is in one partition, so
// keys do not repeat), applies skip and limit, sums total_rows and writes
// the answer a single node would. A coverer under another coverage
// revision refuses (409 coverage_changed) and the merger starts over; a
// coverer that fails (down, timed out) fails the listing with 503 naming
// it: CouchDB's _all_docs has no partial answer.

// allDocsShare is a coverer's share of an _all_docs listing, read a row at
// a time: {"total_rows":N,"rows":[{"k":ID,"r":ROW}]} for a range, each row
// as the answer writes it (appendAllDocsRow), in the listing's order;
// {"total_rows":N,"desc":true?,"rows":[{"i":POS,"r":ROW}]} for keys, POS
// the key's place in keys, the rows in the order the answer gives the
// keys (last first when descending: "desc" says so; a node of the
// previous build sends them first first and no "desc").
type allDocsShare struct {
	total int64
	desc  bool
	// next returns the next row's JSON (valid until the next call), or
	// io.EOF after the last; another error ends the share part way.
	next func() ([]byte, error)
	// ready, when not nil, says whether next would return without
	// waiting (a share on its way from its coverer).
	ready func() bool
	close func()
}

// localAllDocsShare opens this node's share of the listing, of the
// partitions in: the count before the rows, the rows read from the store
// as next asks for them (engine.Collection.List, as one node's listing
// reads them).
func localAllDocsShare(ctx context.Context, c *engine.Collection, p *views.Params, o engine.ListOptions, in []bool) (*allDocsShare, error) {
	// A listing reads current documents, as a single node's does: this
	// node's copies of the partitions it reads first reach every write
	// their leaders acknowledged (a follower's copy may trail).
	var parts []int
	if p.Keys != nil {
		seen := map[int]bool{}
		for _, k := range p.Keys {
			var id string
			if json.Unmarshal(k, &id) == nil {
				if pt := c.Bucket().PartitionOf(id); in[pt] && !seen[pt] {
					seen[pt] = true
					parts = append(parts, pt)
				}
			}
		}
	} else {
		parts = partitionList(in)
	}
	if err := makeCurrent(ctx, c.Bucket(), parts, p.ConnectionTimeout()); err != nil {
		return nil, err
	}
	sh := &allDocsShare{total: c.CountIn(in), desc: p.Keys != nil && p.Descending}
	var out []byte
	var rows iter.Seq2[[]byte, error]
	if p.Keys != nil {
		rows = func(yield func([]byte, error) bool) {
			for j := range p.Keys {
				i := j
				if p.Descending {
					i = len(p.Keys) - 1 - j
				}
				k := p.Keys[i]
				var id string
				if json.Unmarshal(k, &id) != nil || !in[c.Bucket().PartitionOf(id)] {
					continue // a key not a string is the merger's not_found row
				}
				out = append(out[:0], `{"i":`...)
				out = strconv.AppendInt(out, int64(i), 10)
				out = append(out, `,"r":`...)
				out = appendAllDocsRow(out, lookupRow(c, k), k, p.IncludeDocs)
				if !yield(append(out, '}'), nil) {
					return
				}
			}
		}
	} else {
		rows = func(yield func([]byte, error) bool) {
			skip, limit := p.Skip, p.Limit
			if limit == 0 && skip == 0 {
				return
			}
			o.Partitions = in
			if limit >= 0 {
				o.Limit = skip + limit
			}
			for d, err := range c.List(ctx, o) {
				if err != nil {
					yield(nil, err)
					return
				}
				out = append(out[:0], `{"k":`...)
				out = jsonstr.Append(out, d.Key)
				out = append(out, `,"r":`...)
				out = appendAllDocsRow(out, d, nil, p.IncludeDocs)
				if !yield(append(out, '}'), nil) {
					return
				}
			}
		}
	}
	next, stop := iter.Pull2(rows)
	sh.next = func() ([]byte, error) {
		row, err, ok := next()
		if !ok {
			return nil, io.EOF
		}
		return row, err
	}
	sh.close = stop
	return sh, nil
}

// makeCurrent is engine.Bucket.MakeCurrent for a listing's share, given
// three quarters of the listing's connection timeout, as a view share's
// barrier is (views.Query.Partial): a partition with no leader fails the
// share in time for the node asked to name it, where the barrier would
// otherwise wait for a leader as long as the client waits (the node
// asked's own share has no other deadline).
func makeCurrent(ctx context.Context, b *engine.Bucket, parts []int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout*3/4)
	defer cancel()
	return b.MakeCurrent(ctx, parts)
}

// answerAllDocsShare answers another node's request for this node's share
// of an _all_docs listing: its head, then its rows as they are read from
// the store, through a bounded buffer. A failure once the rows are on
// their way ends the answer without its closing bracket, the reason in
// its trailer.
func (s *server) answerAllDocsShare(w http.ResponseWriter, r *http.Request, b *engine.Bucket, c *engine.Collection, p *views.Params, o engine.ListOptions) error {
	want, _, err := s.shareAsked(r, b, s.copies)
	if err != nil {
		return err
	}
	sh, err := localAllDocsShare(r.Context(), c, p, o, want)
	if err != nil {
		return s.closedUnder(b, err)
	}
	defer sh.close()
	extra := ""
	if sh.desc {
		extra = `,"desc":true`
	}
	bw := bufio.NewWriterSize(shareWriter(w, p.ConnectionTimeout()), 32<<10)
	bw.Write(beginShare(w, sh.total, extra))
	for i := 0; ; i++ {
		row, err := sh.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			bw.Flush()
			failShare(w, s.closedUnder(b, err))
			if r.Context().Err() == nil { // not the node asked closing the share early
				s.log.Warn("_all_docs share cut short", "bucket", b.Name(), "err", err)
			}
			return nil
		}
		if i > 0 {
			bw.WriteByte(',')
		}
		if _, err := bw.Write(row); err != nil {
			return nil // the asking node went away
		}
	}
	bw.WriteString("]}")
	bw.Flush()
	return nil
}

// allDocsCluster answers an _all_docs listing on a cluster node from every
// coverer's share (see above), merged as the shares arrive; ok is false
// when the bucket has no coverage yet: the node answers alone.
func (s *server) allDocsCluster(w http.ResponseWriter, r *http.Request, b *engine.Bucket, c *engine.Collection, p *views.Params, o engine.ListOptions, body []byte, updateSeq bool) (bool, error) {
	ctx := r.Context()
	return s.overCoverage(ctx, b, s.copies, func(cov *ViewCoverage) error {
		shares, err := s.scatterAllDocs(ctx, r, b, c, p, o, cov, body)
		if err != nil {
			return err
		}
		defer func() {
			for _, sh := range shares {
				sh.close()
			}
		}()
		// How many nodes' shares the answer merges, as a view query says.
		w.Header().Set("X-Mayfly-View-Nodes", strconv.Itoa(len(cov.Nodes)))
		seq := ""
		if updateSeq {
			seq = changes.CurrentSeq(b)
		}
		return s.writeMergedAllDocs(r.Context(), w, b, p, o, shares, updateSeq, seq)
	})
}

// scatterAllDocs opens every coverer's share of the listing (this node's
// in process), each read up to its rows. A coverer that fails fails the
// listing (503); one under another coverage revision fails it with
// errCoverageChanged.
func (s *server) scatterAllDocs(ctx context.Context, r *http.Request, b *engine.Bucket, c *engine.Collection, p *views.Params, o engine.ListOptions, cov *ViewCoverage, body []byte) ([]*allDocsShare, error) {
	now := b.Clock().Now()
	shares := make([]*allDocsShare, len(cov.Nodes))
	errs := make([]error, len(cov.Nodes))
	var wg sync.WaitGroup
	for i, cv := range cov.Nodes {
		if cv.Self {
			continue
		}
		wg.Go(func() {
			rs, nerr, err := s.openShare(ctx, r, cv, cov.Rev, now, p.ConnectionTimeout(), body)
			switch {
			case err != nil:
				errs[i] = err
			case nerr != nil:
				errs[i] = unavailableShare(cv.Name, nerr)
			default:
				shares[i] = &allDocsShare{total: rs.rd.total, desc: rs.rd.desc, next: rs.next, ready: rs.ready, close: rs.Close}
			}
		})
	}
	for i, cv := range cov.Nodes {
		if !cv.Self {
			continue
		}
		sh, err := localAllDocsShare(ctx, c, p, o, partitionSet(cv.Partitions, b.NumPartitions()))
		if err != nil {
			errs[i] = s.closedUnder(b, err)
		} else {
			shares[i] = sh
		}
	}
	wg.Wait()
	var failed error
	for _, err := range errs {
		if errors.Is(err, errCoverageChanged) || failed == nil {
			failed = err // start over, whatever else failed; else the first, as a single node's error
		}
		if errors.Is(err, errCoverageChanged) {
			break
		}
	}
	if failed == nil && p.Keys != nil {
		for i, sh := range shares {
			if sh.desc != p.Descending {
				// A node of the previous build sends a share of keys
				// first key first: read whole (it is as long as keys is),
				// then given last first.
				shares[i], failed = reversedShare(sh, cov.Nodes[i].Name)
				if failed != nil {
					break
				}
			}
		}
	}
	if failed != nil {
		for _, sh := range shares {
			if sh != nil {
				sh.close()
			}
		}
		return nil, failed
	}
	return shares, nil
}

// unavailableShare is the listing's failure when coverer name's share is
// missing: a listing has no partial answer.
func unavailableShare(name string, nerr *views.NodeError) error {
	return &httpError{http.StatusServiceUnavailable, "unavailable",
		fmt.Sprintf("node %s did not answer for its partitions (%s: %s); the listing would miss its documents", name, nerr.From, nerr.Reason)}
}

// reversedShare reads sh whole and returns it with its rows last first.
func reversedShare(sh *allDocsShare, name string) (*allDocsShare, error) {
	defer sh.close()
	var rows [][]byte
	for {
		row, err := sh.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			var nerr *views.NodeError
			if errors.As(err, &nerr) {
				return nil, unavailableShare(name, nerr)
			}
			return nil, err
		}
		rows = append(rows, bytes.Clone(row))
	}
	slices.Reverse(rows)
	i := 0
	return &allDocsShare{total: sh.total, desc: !sh.desc, close: func() {}, next: func() ([]byte, error) {
		if i == len(rows) {
			return nil, io.EOF
		}
		i++
		return rows[i-1], nil
	}}, nil
}

// mergedHead is a share's next row as the merge reads it.
type mergedHead struct {
	live bool
	pos  int64  // a keys row's position
	key  string // a range row's document key
	row  []byte // the row as the answer writes it
}

// writeMergedAllDocs writes the listing the shares make, as allDocs writes
// one node's, merging them as they arrive: it holds the next row of each
// share, no other. Its head waits for the first row after skip (offset is
// then known, as on one node); a share that fails before the head was
// written fails the listing (503, naming its node), one after ends the
// answer without its closing bracket, as one node's listing cut short
// does (ctx, the client's, says whether that is worth a warning).
func (s *server) writeMergedAllDocs(ctx context.Context, w http.ResponseWriter, b *engine.Bucket, p *views.Params, o engine.ListOptions, shares []*allDocsShare, updateSeq bool, seq string) error {
	var total int64
	for _, sh := range shares {
		total += sh.total
	}
	heads := make([]mergedHead, len(shares))
	bw := bufio.NewWriterSize(w, 32<<10)
	started := false
	var failed *views.NodeError
	var localErr error // this node's share's failure, as it is
	// advance reads share i's next row into its head.
	advance := func(i int) {
		sh := shares[i]
		if started && sh.ready != nil && !sh.ready() {
			// The client has every row merged so far while this
			// share's next row is on its way.
			if bw.Flush() == nil {
				http.NewResponseController(w).Flush()
			}
		}
		raw, err := sh.next()
		heads[i] = mergedHead{}
		switch {
		case err == io.EOF:
		case err != nil:
			if failed == nil {
				var nerr *views.NodeError
				if !errors.As(err, &nerr) {
					localErr = s.closedUnder(b, err)
					nerr = &views.NodeError{From: "local", Reason: localErr.Error()}
				}
				failed = nerr
			}
		case p.Keys != nil:
			f := gjson.GetManyBytes(raw, "i", "r")
			heads[i] = mergedHead{live: true, pos: f[0].Int(), row: rawOf(raw, f[1])}
		default:
			f := gjson.GetManyBytes(raw, "k", "r")
			heads[i] = mergedHead{live: true, key: f[0].String(), row: rawOf(raw, f[1])}
		}
	}
	for i := range shares {
		advance(i)
	}
	offset := -1
	skip, limit := p.Skip, p.Limit
	rows, skipped := 0, 0
	var line []byte
	// start writes the answer's head, once, with the offset the rows
	// skipped give when the listing starts at its beginning.
	start := func() {
		if started {
			return
		}
		started = true
		if p.Keys == nil && o.Start == nil {
			offset = skipped
		}
		writeMergedAllDocsHead(w, bw, total, offset, updateSeq, seq)
	}
	// emit writes a row (or passes over it while skip lasts) and says
	// whether more are wanted.
	emit := func(row []byte) bool {
		if skip > 0 {
			skip--
			skipped++
			return true
		}
		if limit >= 0 && rows >= limit {
			return false
		}
		start()
		sep := ",\r\n"
		if rows == 0 {
			sep = "\r\n"
		}
		line = append(append(line[:0], sep...), row...)
		rows++
		if _, err := bw.Write(line); err != nil {
			return false // the client went away
		}
		return limit < 0 || rows < limit
	}
	if p.Keys != nil {
		for j := range p.Keys {
			at := j
			if p.Descending {
				at = len(p.Keys) - 1 - j
			}
			if failed != nil {
				break // the failed share's keys are not known missing
			}
			from := -1
			for i := range heads {
				if heads[i].live && heads[i].pos == int64(at) {
					from = i
					break
				}
			}
			if from < 0 { // a key that is not a document ID
				if !emit(appendAllDocsRow(nil, nil, p.Keys[at], false)) {
					break
				}
				continue
			}
			if !emit(heads[from].row) {
				break
			}
			advance(from) // once its row is written: the head's bytes are the share's
		}
	} else {
		for failed == nil {
			best := -1
			for i := range heads {
				if !heads[i].live {
					continue
				}
				if best < 0 || (strings.Compare(heads[i].key, heads[best].key) < 0) != o.Descending {
					best = i
				}
			}
			if best < 0 || !emit(heads[best].row) {
				break
			}
			advance(best)
		}
	}
	if failed != nil {
		if !started { // nothing sent: a proper error status
			if localErr != nil {
				return localErr // as one node's listing fails
			}
			return unavailableShare(failed.From, failed)
		}
		// The listing has begun: it ends without its closing bracket, as
		// one node's cut short does, so that no client takes it for a
		// whole one (CouchDB's clients read no "errors" in _all_docs: a
		// pager would go on after its last key and skip the rest).
		if ctx.Err() == nil {
			s.log.Warn("_all_docs cut short", "bucket", b.Name(), "from", failed.From, "err", failed.Reason)
		}
		bw.Flush()
		return nil
	}
	start()
	bw.WriteString("\r\n]}\n")
	bw.Flush()
	return nil
}

// writeMergedAllDocsHead sends a merged listing's status and head.
func writeMergedAllDocsHead(w http.ResponseWriter, bw *bufio.Writer, total int64, offset int, updateSeq bool, seq string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "must-revalidate")
	w.WriteHeader(http.StatusOK)
	writeAllDocsHead(bw, total, offset, updateSeq, seq)
}

// listingCluster runs a listing on a cluster node: it asks every coverer
// for its share (local makes this node's, in process, for the partitions
// it covers; the others are asked with r passed on) and gives the shares to
// write, in the coverers' order. It starts over when a coverer answers
// under another coverage revision; ok is false when the bucket has no
// coverage yet.
func (s *server) listingCluster(w http.ResponseWriter, r *http.Request, b *engine.Bucket, timeout time.Duration, body []byte, local func(in []bool) ([]byte, error), write func(shares []gjson.Result)) (bool, error) {
	return s.overCoverage(r.Context(), b, s.copies, func(cov *ViewCoverage) error {
		shares, err := s.scatterListing(r.Context(), r, b, cov, timeout, body, local)
		if err != nil {
			return err
		}
		// How many nodes' shares the answer merges, as a view query says.
		w.Header().Set("X-Mayfly-View-Nodes", strconv.Itoa(len(cov.Nodes)))
		write(shares)
		return nil
	})
}

// scatterListing asks every coverer of cov for its share (this node's in
// process). A coverer that fails fails the listing (503); one under another
// coverage revision fails it with errCoverageChanged.
func (s *server) scatterListing(ctx context.Context, r *http.Request, b *engine.Bucket, cov *ViewCoverage, timeout time.Duration, body []byte, local func(in []bool) ([]byte, error)) ([]gjson.Result, error) {
	now := b.Clock().Now()
	shares := make([]gjson.Result, len(cov.Nodes))
	errs := make([]error, len(cov.Nodes))
	var wg sync.WaitGroup
	for i, cv := range cov.Nodes {
		if cv.Self {
			continue
		}
		wg.Go(func() {
			ans, nerr, err := s.fetchShare(ctx, r, cv, cov.Rev, now, timeout, body)
			switch {
			case err != nil:
				errs[i] = err
			case nerr != nil:
				errs[i] = &httpError{http.StatusServiceUnavailable, "unavailable",
					fmt.Sprintf("node %s did not answer for its partitions (%s: %s); the listing would miss its documents", cv.Name, nerr.From, nerr.Reason)}
			default:
				shares[i] = ans
			}
		})
	}
	for i, cv := range cov.Nodes {
		if !cv.Self {
			continue
		}
		out, err := local(partitionSet(cv.Partitions, b.NumPartitions()))
		if err != nil {
			errs[i] = s.closedUnder(b, err)
		} else {
			shares[i] = gjson.ParseBytes(out)
		}
	}
	wg.Wait()
	for _, err := range errs {
		if errors.Is(err, errCoverageChanged) {
			return nil, err // start over, whatever else failed
		}
	}
	for _, err := range errs {
		if err != nil {
			return nil, err // the first, as a single node's error
		}
	}
	return shares, nil
}

// writeAllDocsHead writes an _all_docs answer's head, up to the rows'
// opening bracket; offset < 0 leaves offset out.
func writeAllDocsHead(bw *bufio.Writer, total int64, offset int, updateSeq bool, seq string) {
	bw.WriteString(`{"total_rows":` + strconv.FormatInt(total, 10))
	if offset >= 0 {
		bw.WriteString(`,"offset":` + strconv.Itoa(offset))
	}
	if updateSeq {
		bw.WriteString(`,"update_seq":"` + seq + `"`)
	}
	bw.WriteString(`,"rows":[`)
}

// partitionList is the partitions of the set in, ascending.
func partitionList(in []bool) []int {
	var out []int
	for p, ok := range in {
		if ok {
			out = append(out, p)
		}
	}
	return out
}

// keyedRow is a row of a listing's share: its document's key and the row
// as the answer writes it.
type keyedRow struct{ k, r string }

// keyedRows is every row of the shares ({"rows":[{"k":KEY,"r":ROW}]}) in
// key order, descending if desc (keys do not repeat: a document is in one
// partition).
func keyedRows(shares []gjson.Result, desc bool) []keyedRow {
	var all []keyedRow
	for _, sh := range shares {
		sh.Get("rows").ForEach(func(_, v gjson.Result) bool {
			all = append(all, keyedRow{v.Get("k").String(), v.Get("r").Raw})
			return true
		})
	}
	slices.SortFunc(all, func(a, b keyedRow) int {
		if desc {
			return strings.Compare(b.k, a.k)
		}
		return strings.Compare(a.k, b.k)
	})
	return all
}
