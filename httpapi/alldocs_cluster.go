package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

// allDocsShare is a coverer's share of an _all_docs listing, as JSON:
// {"total_rows":N,"rows":[{"k":ID,"r":ROW}]} for a range, each row as the
// answer writes it (appendAllDocsRow), in the listing's order;
// {"total_rows":N,"rows":[{"i":POS,"r":ROW}]} for keys, POS the key's place
// in keys.
func allDocsShare(ctx context.Context, c *engine.Collection, p *views.Params, o engine.ListOptions, in []bool) ([]byte, error) {
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
	out := append([]byte(`{"total_rows":`), strconv.FormatInt(c.CountIn(in), 10)...)
	out = append(out, `,"rows":[`...)
	first := true
	sep := func() {
		if !first {
			out = append(out, ',')
		}
		first = false
	}
	if p.Keys != nil {
		for i, k := range p.Keys {
			var id string
			if json.Unmarshal(k, &id) != nil || !in[c.Bucket().PartitionOf(id)] {
				continue // a key not a string is the merger's not_found row
			}
			sep()
			out = append(out, `{"i":`...)
			out = strconv.AppendInt(out, int64(i), 10)
			out = append(out, `,"r":`...)
			out = appendAllDocsRow(out, lookupRow(c, k), k, p.IncludeDocs)
			out = append(out, '}')
		}
		return append(out, "]}"...), nil
	}
	skip, limit := p.Skip, p.Limit
	if limit == 0 && skip == 0 {
		return append(out, "]}"...), nil
	}
	o.Partitions = in
	if limit >= 0 {
		o.Limit = skip + limit
	}
	for d, err := range c.List(ctx, o) {
		if err != nil {
			return nil, err
		}
		sep()
		out = append(out, `{"k":`...)
		out = jsonstr.Append(out, d.Key)
		out = append(out, `,"r":`...)
		out = appendAllDocsRow(out, d, nil, p.IncludeDocs)
		out = append(out, '}')
	}
	return append(out, "]}"...), nil
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
// of an _all_docs listing.
func (s *server) answerAllDocsShare(w http.ResponseWriter, r *http.Request, b *engine.Bucket, c *engine.Collection, p *views.Params, o engine.ListOptions) error {
	want, _, err := s.shareAsked(r, b, s.copies)
	if err != nil {
		return err
	}
	out, err := allDocsShare(r.Context(), c, p, o, want)
	if err != nil {
		return s.closedUnder(b, err)
	}
	w.Header().Set("Content-Type", "application/json")
	_, err = w.Write(out)
	return err
}

// allDocsCluster answers an _all_docs listing on a cluster node from every
// coverer's share (see above); ok is false when the bucket has no coverage
// yet: the node answers alone.
func (s *server) allDocsCluster(w http.ResponseWriter, r *http.Request, b *engine.Bucket, c *engine.Collection, p *views.Params, o engine.ListOptions, body []byte, updateSeq bool) (bool, error) {
	timeout := p.ConnectionTimeout()
	local := func(in []bool) ([]byte, error) { return allDocsShare(r.Context(), c, p, o, in) }
	return s.listingCluster(w, r, b, timeout, body, local, func(shares []gjson.Result) {
		seq := ""
		if updateSeq {
			seq = changes.CurrentSeq(b)
		}
		writeMergedAllDocs(w, p, o, shares, updateSeq, seq)
	})
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

// writeMergedAllDocs writes the listing the shares make, as allDocs writes
// one node's.
func writeMergedAllDocs(w http.ResponseWriter, p *views.Params, o engine.ListOptions, shares []gjson.Result, updateSeq bool, seq string) {
	var total int64
	for _, sh := range shares {
		total += sh.Get("total_rows").Int()
	}
	var rows []string
	offset := -1
	if p.Keys != nil {
		byPos := make([]string, len(p.Keys))
		for _, sh := range shares {
			sh.Get("rows").ForEach(func(_, v gjson.Result) bool {
				if i := int(v.Get("i").Int()); i >= 0 && i < len(byPos) {
					byPos[i] = v.Get("r").Raw
				}
				return true
			})
		}
		for i := range p.Keys {
			at := i
			if p.Descending {
				at = len(p.Keys) - 1 - i
			}
			row := byPos[at]
			if row == "" { // a key that is not a document ID
				row = string(appendAllDocsRow(nil, nil, p.Keys[at], false))
			}
			rows = append(rows, row)
		}
		rows = rows[min(p.Skip, len(rows)):]
	} else {
		all := keyedRows(shares, o.Descending)
		skipped := min(p.Skip, len(all))
		if o.Start == nil {
			offset = skipped
		}
		for _, kr := range all[skipped:] {
			rows = append(rows, kr.r)
		}
	}
	if p.Limit >= 0 && len(rows) > p.Limit {
		rows = rows[:p.Limit]
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "must-revalidate")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriter(w)
	writeAllDocsHead(bw, total, offset, updateSeq, seq)
	for i, row := range rows {
		if i == 0 {
			bw.WriteString("\r\n")
		} else {
			bw.WriteString(",\r\n")
		}
		bw.WriteString(row)
	}
	bw.WriteString("\r\n]}\n")
	bw.Flush()
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
