package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/views"
	"github.com/tidwall/gjson"
)

// ViewCoverage says which cluster node answers for which partitions of a
// bucket's views: each partition is covered by exactly one node.
type ViewCoverage struct {
	// Rev identifies the assignment (the revision of the bucket's
	// partition map). A node asked for its share under another revision
	// refuses, and the querying node reads the coverage again.
	Rev int64
	// Nodes are the coverers, each with its partitions.
	Nodes []Coverer
}

// Coverer is one node of a ViewCoverage.
type Coverer struct {
	// Name is the node's name in the cluster.
	Name string
	// URL is the base URL of the node's HTTP API, "http://host:port";
	// "" when it is not known (the node is down): the query's errors
	// name the node, reason "node_down".
	URL string
	// Self says the node is this one: its share is answered in process.
	Self bool
	// Partitions are the partitions whose rows the node answers for.
	Partitions []int
}

// Parameters of a request for one node's share of a view query (the
// client's parameters and body are passed on as they are).
const (
	shareRev        = "_share_rev"        // the coverage revision the querying node read
	shareNow        = "_share_now"        // the querying node's instant, Unix seconds
	sharePartitions = "_share_partitions" // the partitions asked for: "0-340,512"
)

// defaultConnectionTimeout is Couchbase's connection_timeout default, in
// milliseconds: how long a coverer's share is waited for.
const defaultConnectionTimeout = views.DefaultConnectionTimeoutMS

// maxCoverageRetries bounds how many times a scatter starts again when a
// coverer answers under another coverage revision.
const maxCoverageRetries = 5

// maxShareBody bounds a coverer's answer, in bytes.
const maxShareBody = 1 << 30

// errCoverageChanged is a coverer's refusal to answer under another
// coverage revision than its own.
var errCoverageChanged = errors.New("the view coverage changed")

// queryViewCluster answers a view query on a cluster node: a request for
// this node's share (from another node's scatter) gets its Partial; a
// client's query scatters to the coverers and merges their shares. ok is
// false when the bucket has no coverage yet: the node answers alone.
func (s *server) queryViewCluster(w http.ResponseWriter, r *http.Request, b *engine.Bucket, q *views.Query, p *views.Params, body []byte) (bool, error) {
	ctx := r.Context()
	if r.URL.Query().Has(shareRev) {
		return true, s.answerShare(w, r, b, q)
	}
	return s.overCoverage(ctx, b, s.coverage, func(cov *ViewCoverage) error {
		parts, errs, err := s.scatter(ctx, r, b, q, p, cov, body)
		if err != nil {
			return err
		}
		if p.OnErrorStop && len(errs) > 0 {
			// Couchbase stops at the first error and appends it alone.
			parts, errs = nil, errs[:1]
		}
		w.Header().Set("Cache-Control", "must-revalidate")
		// How many nodes' shares the answer merges (those failed included).
		w.Header().Set("X-Mayfly-View-Nodes", strconv.Itoa(len(cov.Nodes)))
		err = q.Merge(ctx, parts, errs, &lazyJSON{w: w})
		var se *views.StreamError
		if errors.As(err, &se) {
			s.log.Warn("view query cut short", "bucket", b.Name(), "err", err)
			return nil
		}
		return err
	})
}

// coverageFunc is Options.ViewCoverage's (and CopyCoverage's) type.
type coverageFunc = func(ctx context.Context, bucket string, atLeast int64) (*ViewCoverage, error)

// overCoverage runs do with bucket b's coverage (which node answers for
// which partitions: s.coverage for views, s.copies for listings and the
// item count), and again with
// the coverage read anew when a coverer answered under another revision
// (do's error wraps errCoverageChanged), after a pause for this node's
// and the coverer's copies of the coverage to agree again (each follows
// etcd by a watch): a stale revision is retried, never answered, up to
// maxCoverageRetries times. ok is false when the bucket has no coverage
// yet (a single node, or no map): the node answers alone.
func (s *server) overCoverage(ctx context.Context, b *engine.Bucket, coverage coverageFunc, do func(cov *ViewCoverage) error) (ok bool, err error) {
	for tries := 0; ; tries++ {
		cov, err := coverage(ctx, b.Name(), 0)
		if err != nil {
			return true, err
		}
		if cov == nil {
			return false, nil
		}
		if len(cov.Nodes) == 0 {
			return true, errors.New("the bucket's coverage names no node")
		}
		err = do(cov)
		if errors.Is(err, errCoverageChanged) && tries < maxCoverageRetries && ctx.Err() == nil {
			select {
			case <-ctx.Done():
			case <-time.After(time.Duration(tries+1) * 10 * time.Millisecond):
			}
			continue
		}
		return true, err
	}
}

// scatter asks every coverer of cov for its share of the query (this node
// in process) and returns the shares answered and the failures, in the
// coverers' order. A coverer that answers under another coverage revision
// fails it all with errCoverageChanged.
func (s *server) scatter(ctx context.Context, r *http.Request, b *engine.Bucket, q *views.Query, p *views.Params, cov *ViewCoverage, body []byte) ([]*views.Partial, []views.NodeError, error) {
	now := b.Clock().Now()
	timeout := p.ConnectionTimeout()
	n := len(cov.Nodes)
	parts := make([]*views.Partial, n)
	errs := make([]*views.NodeError, n)
	var changed error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, c := range cov.Nodes {
		if c.Self {
			continue // answered below, in this goroutine: q is not shared
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			part, nerr, err := s.askShare(ctx, r, c, cov.Rev, now, timeout, body)
			mu.Lock()
			defer mu.Unlock()
			parts[i], errs[i] = part, nerr
			if err != nil {
				changed = err
			}
		}()
	}
	var selfErr error
	for i, c := range cov.Nodes {
		if !c.Self {
			continue
		}
		covered := partitionSet(c.Partitions, b.NumPartitions())
		parts[i], selfErr = q.Partial(ctx, views.Share{Now: now, Partitions: covered})
		if errors.Is(selfErr, engine.ErrNotCurrent) || errors.Is(selfErr, views.ErrTimeout) {
			// stale=false, and this node's copy of a partition it covers
			// could not be made current, or its index did not catch up
			// within connection_timeout: its share is missing, as
			// another coverer's would be, not answered stale.
			from := c.Name
			if c.URL != "" {
				from = c.URL + r.URL.EscapedPath()
			}
			reason := classify(selfErr).reason
			if errors.Is(selfErr, views.ErrTimeout) {
				reason = "timeout" // Couchbase's, as for a coverer that does not answer in time
			}
			parts[i], errs[i], selfErr = nil, &views.NodeError{From: from, Reason: reason}, nil
		}
	}
	wg.Wait()
	if selfErr != nil {
		return nil, nil, selfErr // as a query on one node fails
	}
	if changed != nil {
		return nil, nil, changed
	}
	var answered []*views.Partial
	var failed []views.NodeError
	for i := range n {
		if parts[i] != nil {
			answered = append(answered, parts[i])
		} else if errs[i] != nil {
			failed = append(failed, *errs[i])
		}
	}
	return answered, failed, nil
}

// askShare asks coverer c for its share. A failure is a NodeError as
// Couchbase's errors list shows it (reason req_timedout past the
// connection timeout); only a refusal under another coverage revision is
// an error.
func (s *server) askShare(ctx context.Context, r *http.Request, c Coverer, rev, now int64, timeout time.Duration, body []byte) (*views.Partial, *views.NodeError, error) {
	ans, nerr, err := s.fetchShare(ctx, r, c, rev, now, timeout, body)
	if nerr != nil || err != nil {
		return nil, nerr, err
	}
	return decodeShare(ans), nil, nil
}

// fetchShare sends r, as a request for coverer c's share under coverage
// revision rev, to c, and returns its answer (valid JSON, status 200);
// failures as askShare has them.
func (s *server) fetchShare(ctx context.Context, r *http.Request, c Coverer, rev, now int64, timeout time.Duration, body []byte) (gjson.Result, *views.NodeError, error) {
	var none gjson.Result
	if c.URL == "" {
		return none, &views.NodeError{From: c.Name, Reason: "node_down"}, nil
	}
	from := c.URL + r.URL.EscapedPath()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	u := from + "?" + r.URL.RawQuery
	if r.URL.RawQuery != "" {
		u += "&"
	}
	u += shareRev + "=" + strconv.FormatInt(rev, 10) + "&" + shareNow + "=" + strconv.FormatInt(now, 10) +
		"&" + sharePartitions + "=" + formatPartitions(c.Partitions)
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, u, rd)
	if err != nil {
		return none, &views.NodeError{From: from, Reason: err.Error()}, nil
	}
	if a := r.Header.Get("Authorization"); a != "" {
		req.Header.Set("Authorization", a)
		s.setUsersVersion(req.Header)
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	resp, err := s.shares.Do(req)
	if err != nil {
		return none, &views.NodeError{From: from, Reason: transportReason(ctx, err)}, nil
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxShareBody+1))
	switch {
	case err != nil:
		return none, &views.NodeError{From: from, Reason: transportReason(ctx, err)}, nil
	case len(data) > maxShareBody:
		return none, &views.NodeError{From: from, Reason: fmt.Sprintf("the node's answer is over %d bytes", maxShareBody)}, nil
	case !gjson.ValidBytes(data):
		return none, &views.NodeError{From: from, Reason: "the node's answer is not JSON"}, nil
	}
	ans := gjson.ParseBytes(data)
	if resp.StatusCode != http.StatusOK {
		if resp.StatusCode == http.StatusConflict && ans.Get("error").String() == "coverage_changed" {
			return none, nil, fmt.Errorf("%w: %s", errCoverageChanged, ans.Get("reason").String())
		}
		reason := ans.Get("reason").String()
		if reason == "" {
			reason = resp.Status
		}
		return none, &views.NodeError{From: from, Reason: reason}, nil
	}
	return ans, nil, nil
}

// transportReason names a failed request to a coverer as Couchbase's
// errors list does.
func transportReason(ctx context.Context, err error) string {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return "req_timedout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "econnrefused"
	}
	return err.Error()
}

// answerShare answers another node's request for this node's share of a
// view query: the rows of the partitions it asks for, at its instant, as
// encodeShare writes them; 409 coverage_changed when this node's coverage
// is not the one the other node read, or does not give it those
// partitions. The revision is read again once the rows are: a coverage
// moved meanwhile may have had the partitions this node no longer covers
// dropped from its indexes (views.Service.Cover) before the query read
// them, and is coverage_changed too, never rows missing silently.
func (s *server) answerShare(w http.ResponseWriter, r *http.Request, b *engine.Bucket, q *views.Query) error {
	want, now, err := s.shareAsked(r, b, s.coverage)
	if err != nil {
		return err
	}
	part, err := q.Partial(r.Context(), views.Share{Now: now, Partitions: want})
	if err != nil {
		return err
	}
	if _, _, err := s.shareAsked(r, b, s.coverage); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	_, err = w.Write(encodeShare(part))
	return err
}

// shareAsked reads a share request's parameters (its partitions, as a set,
// and the querying node's instant) and checks them against this node's
// coverage: 409 coverage_changed when its revision is not the one the
// querying node read, or does not give this node those partitions.
func (s *server) shareAsked(r *http.Request, b *engine.Bucket, coverage coverageFunc) ([]bool, int64, error) {
	v := r.URL.Query()
	rev, err1 := strconv.ParseInt(v.Get(shareRev), 10, 64)
	now, err2 := strconv.ParseInt(v.Get(shareNow), 10, 64)
	want, err3 := parsePartitions(v.Get(sharePartitions), b.NumPartitions())
	if err := errors.Join(err1, err2, err3); err != nil {
		return nil, 0, errBadRequest("a share request's parameters: " + err.Error())
	}
	cov, err := coverage(r.Context(), b.Name(), rev)
	if err != nil {
		return nil, 0, err
	}
	var mine []bool
	if cov != nil && cov.Rev == rev {
		for _, c := range cov.Nodes {
			if c.Self {
				mine = partitionSet(c.Partitions, b.NumPartitions())
			}
		}
	}
	for p, asked := range want {
		if asked && (mine == nil || !mine[p]) {
			have := int64(0)
			if cov != nil {
				have = cov.Rev
			}
			return nil, 0, &httpError{http.StatusConflict, "coverage_changed", fmt.Sprintf("asked for partition %d under view coverage revision %d; this node's is %d", p, rev, have)}
		}
	}
	return want, now, nil
}

// encodeShare writes a Partial as JSON: {"total_rows":N,"rows":[{"s":seg,
// "id":...,"key":...,"value":...,"doc":...}]}, the raw JSON of the rows as
// the index holds it.
func encodeShare(p *views.Partial) []byte {
	var b bytes.Buffer
	b.WriteString(`{"total_rows":` + strconv.Itoa(p.TotalRows) + `,"rows":[`)
	for i, r := range p.Rows {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"s":` + strconv.Itoa(r.Seg))
		if r.ID != "" {
			id, _ := json.Marshal(r.ID)
			b.WriteString(`,"id":`)
			b.Write(id)
		}
		b.WriteString(`,"key":`)
		b.Write(r.Key)
		b.WriteString(`,"value":`)
		b.Write(r.Value)
		if r.Doc != nil {
			b.WriteString(`,"doc":`)
			b.Write(r.Doc)
		}
		b.WriteByte('}')
	}
	b.WriteString("]}")
	return b.Bytes()
}

// decodeShare reads what encodeShare wrote (valid JSON).
func decodeShare(ans gjson.Result) *views.Partial {
	p := &views.Partial{TotalRows: int(ans.Get("total_rows").Int())}
	ans.Get("rows").ForEach(func(_, v gjson.Result) bool {
		row := views.PartialRow{Seg: int(v.Get("s").Int()), ID: v.Get("id").String(),
			Key: []byte(v.Get("key").Raw), Value: []byte(v.Get("value").Raw)}
		if d := v.Get("doc"); d.Exists() {
			row.Doc = []byte(d.Raw)
		}
		p.Rows = append(p.Rows, row)
		return true
	})
	return p
}

// formatPartitions writes a set of partitions as ascending ranges:
// "0-340,512".
func formatPartitions(ps []int) string {
	ps = slices.Sorted(slices.Values(ps))
	var b strings.Builder
	for i := 0; i < len(ps); {
		j := i
		for j+1 < len(ps) && ps[j+1] <= ps[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(ps[i]))
		if ps[j] != ps[i] {
			b.WriteString("-" + strconv.Itoa(ps[j]))
		}
		i = j + 1
	}
	return b.String()
}

// parsePartitions reads what formatPartitions wrote, as a set of n
// partitions.
func parsePartitions(s string, n int) ([]bool, error) {
	set := make([]bool, n)
	if s == "" {
		return set, nil
	}
	for _, r := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("partition range %q", r)
		}
		z := a
		if isRange {
			if z, err = strconv.Atoi(hi); err != nil {
				return nil, fmt.Errorf("partition range %q", r)
			}
		}
		if a < 0 || z < a || z >= n {
			return nil, fmt.Errorf("partition range %q outside 0-%d", r, n-1)
		}
		for p := a; p <= z; p++ {
			set[p] = true
		}
	}
	return set, nil
}

// partitionSet returns ps as a set of n partitions (those out of range
// left out).
func partitionSet(ps []int, n int) []bool {
	set := make([]bool, n)
	for _, p := range ps {
		if p >= 0 && p < n {
			set[p] = true
		}
	}
	return set
}
