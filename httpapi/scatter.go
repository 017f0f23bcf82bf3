package httpapi

import (
	"bufio"
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
	"github.com/mayflydb/mayfly/internal/jsonstr"
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

// maxShareBody bounds a coverer's answer read whole (fetchShare), in
// bytes.
const maxShareBody = 1 << 30

// maxErrorBody bounds a coverer's error answer, in bytes.
const maxErrorBody = 1 << 20

// errCoverageChanged is a coverer's refusal to answer under another
// coverage revision than its own.
var errCoverageChanged = errors.New("the view coverage changed")

// queryViewCluster answers a view query on a cluster node: a request for
// this node's share (from another node's scatter) gets its Partial (its
// ForecastShare for a forecast); a client's query scatters to the
// coverers and merges their shares. ok is false when the bucket has no
// coverage yet: the node answers alone.
func (s *server) queryViewCluster(w http.ResponseWriter, r *http.Request, b *engine.Bucket, q *views.Query, p *views.Params, body []byte) (bool, error) {
	ctx := r.Context()
	if r.URL.Query().Has(shareRev) {
		if p.Forecast > 0 {
			return true, s.answerForecastShare(w, r, b, q)
		}
		return true, s.answerShare(w, r, b, q)
	}
	if p.Forecast > 0 {
		return s.overCoverage(ctx, b, s.coverage, func(cov *ViewCoverage) error {
			return s.scatterForecast(ctx, w, r, b, q, p, cov, body)
		})
	}
	return s.overCoverage(ctx, b, s.coverage, func(cov *ViewCoverage) error {
		srcs, errs, closeAll, err := s.scatter(ctx, r, b, q, p, cov, body)
		if err != nil {
			return err
		}
		defer closeAll()
		if p.OnErrorStop && len(errs) > 0 {
			// Couchbase stops at the first error and appends it alone.
			srcs, errs = nil, errs[:1]
		}
		w.Header().Set("Cache-Control", "must-revalidate")
		// How many nodes' shares the answer merges (those failed included).
		w.Header().Set("X-Mayfly-View-Nodes", strconv.Itoa(len(cov.Nodes)))
		err = q.MergeSources(ctx, srcs, errs, &lazyJSON{w: w})
		var se *views.StreamError
		if errors.As(err, &se) {
			if ctx.Err() == nil { // not the client hanging up
				s.log.Warn("view query cut short", "bucket", b.Name(), "err", err)
			}
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

// scatter asks every coverer of cov for its share (this node's in
// process) and returns the shares answered, as sources whose rows are read
// as the merge needs them (each coverer's head read already), and the
// failures, in the coverers' order; closeAll ends every share's request
// and gives this node's index snapshot back. A coverer that answers under
// another coverage revision fails it all with errCoverageChanged, and one
// whose reduce failed with its views.ReduceError.
func (s *server) scatter(ctx context.Context, r *http.Request, b *engine.Bucket, q *views.Query, p *views.Params, cov *ViewCoverage, body []byte) (srcs []views.Source, failed []views.NodeError, closeAll func(), err error) {
	now := b.Clock().Now()
	timeout := p.ConnectionTimeout()
	n := len(cov.Nodes)
	remote := make([]*remoteShare, n)
	errs := make([]*views.NodeError, n)
	var local *views.ShareStream
	var localFrom string
	closeAll = func() {
		for _, rs := range remote {
			if rs != nil {
				rs.Close()
			}
		}
		if local != nil {
			local.Close()
		}
	}
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
			rs, nerr, err := s.openShare(ctx, r, c, cov.Rev, now, timeout, body)
			mu.Lock()
			defer mu.Unlock()
			remote[i], errs[i] = rs, nerr
			if err != nil && (changed == nil || errors.Is(err, errCoverageChanged)) {
				changed = err // a coverage that moved is asked again first
			}
		}()
	}
	var selfErr error
	selfAt := -1
	for i, c := range cov.Nodes {
		if !c.Self || selfAt >= 0 {
			continue
		}
		selfAt = i
		covered := partitionSet(c.Partitions, b.NumPartitions())
		localFrom = c.Name
		if c.URL != "" {
			localFrom = c.URL + r.URL.EscapedPath()
		}
		local, selfErr = q.Stream(ctx, views.Share{Now: now, Partitions: covered})
		if reason, missing := localShareMissing(selfErr); missing {
			local, errs[i], selfErr = nil, &views.NodeError{From: localFrom, Reason: reason}, nil
		}
	}
	wg.Wait()
	if selfErr != nil || changed != nil {
		closeAll()
		if selfErr != nil {
			return nil, nil, nil, selfErr // as a query on one node fails
		}
		return nil, nil, nil, changed
	}
	for i := range n {
		switch {
		case remote[i] != nil:
			rs := remote[i]
			srcs = append(srcs, views.Source{From: rs.from, TotalRows: int(rs.rd.total), Ready: rs.ready, Next: func() (views.PartialRow, error) {
				raw, err := rs.next()
				if err != nil {
					return views.PartialRow{}, err
				}
				return decodeShareRow(raw), nil
			}})
		case i == selfAt && local != nil:
			srcs = append(srcs, local.Source(localFrom))
		case errs[i] != nil:
			failed = append(failed, *errs[i])
		}
	}
	return srcs, failed, closeAll, nil
}

// localShareMissing says whether err, the failure of this node's own
// share, leaves the share missing (named in the answer's errors, with the
// reason returned) rather than failing the query as on one node:
// stale=false, and this node's copy of a partition it covers could not be
// made current, or its index did not catch up within connection_timeout;
// or its index was closed under the query (its bucket restarting) and the
// design document is not open again yet. Its share is then missing as
// another coverer's would be, not answered stale nor failing the other
// nodes' rows.
func localShareMissing(err error) (reason string, missing bool) {
	switch {
	case errors.Is(err, views.ErrTimeout):
		return "timeout", true // Couchbase's, as for a coverer that does not answer in time
	case errors.Is(err, engine.ErrNotCurrent), errors.Is(err, engine.ErrWarmup):
		return classify(err).reason, true
	}
	return "", false
}

// scatterForecast answers a forecast query (forecast=) on a cluster node:
// every coverer of cov is asked for its share's forecast (this node's in
// process), all at this node's instant so that the intervals line up, and
// the shares are summed (views.Query.MergeForecasts) into what one node
// holding every document answers. A coverer that fails is named in the
// answer's "errors", as for a row query; one that answers under another
// coverage revision starts it again (errCoverageChanged), and a reduce that
// failed in any share fails the query (views.ErrReduce), as on one node.
// A coverer's answer not marked as a share (forecastShareJSON: a node of
// another build) is named in "errors" too, its counts left out.
func (s *server) scatterForecast(ctx context.Context, w http.ResponseWriter, r *http.Request, b *engine.Bucket, q *views.Query, p *views.Params, cov *ViewCoverage, body []byte) error {
	now := b.Clock().Now()
	timeout := p.ConnectionTimeout()
	n := len(cov.Nodes)
	parts := make([]*views.NodeForecast, n)
	errs := make([]*views.NodeError, n)
	var fatal error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, c := range cov.Nodes {
		if c.Self {
			continue
		}
		wg.Go(func() {
			ans, nerr, err := s.fetchShare(ctx, r, c, cov.Rev, now, timeout, body)
			var f forecastShareJSON
			if err == nil && nerr == nil {
				switch jerr := json.Unmarshal([]byte(ans.Raw), &f); {
				case jerr != nil || f.ViewForecast == nil:
					nerr = &views.NodeError{From: c.URL + r.URL.EscapedPath(), Reason: "the node's answer is not a forecast"}
				case !f.Share:
					// A node of another build: its answer may be its
					// whole index's forecast, replicas included.
					nerr = &views.NodeError{From: c.URL + r.URL.EscapedPath(), Reason: errNotAForecastShare}
				}
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				if fatal == nil || errors.Is(err, errCoverageChanged) {
					fatal = err // a coverage that moved is asked again first
				}
			case nerr != nil:
				errs[i] = nerr
			default:
				parts[i] = &views.NodeForecast{From: c.URL + r.URL.EscapedPath(), Forecast: f.ViewForecast}
			}
		})
	}
	var selfErr error
	for i, c := range cov.Nodes {
		if !c.Self {
			continue
		}
		from := c.Name
		if c.URL != "" {
			from = c.URL + r.URL.EscapedPath()
		}
		f, err := q.ForecastShare(ctx, views.Share{Now: now, Partitions: partitionSet(c.Partitions, b.NumPartitions())})
		if reason, missing := localShareMissing(err); missing {
			errs[i] = &views.NodeError{From: from, Reason: reason}
		} else if err != nil {
			selfErr = err // as a query on one node fails
		} else {
			parts[i] = &views.NodeForecast{From: from, Forecast: f}
		}
		break
	}
	wg.Wait()
	switch {
	case errors.Is(fatal, errCoverageChanged):
		return fatal
	case selfErr != nil:
		return selfErr
	case fatal != nil:
		return fatal
	}
	var got []views.NodeForecast
	var failed []views.NodeError
	for i := range n {
		switch {
		case parts[i] != nil:
			got = append(got, *parts[i])
		case errs[i] != nil:
			failed = append(failed, *errs[i])
		}
	}
	w.Header().Set("Cache-Control", "must-revalidate")
	w.Header().Set("X-Mayfly-View-Nodes", strconv.Itoa(n))
	return q.MergeForecasts(ctx, now, got, failed, &lazyJSON{w: w})
}

// answerForecastShare answers another node's request for this node's
// share of a forecast query: the forecast of the rows of the partitions it
// asks for, at its instant (views.Query.ForecastShare), whole, as one
// node's forecast answer is; 409 coverage_changed as for answerShare,
// checked again once the forecast is computed (a coverage moved meanwhile
// may have had partitions dropped from this node's indexes).
func (s *server) answerForecastShare(w http.ResponseWriter, r *http.Request, b *engine.Bucket, q *views.Query) error {
	want, now, err := s.shareAsked(r, b, s.coverage)
	if err != nil {
		return err
	}
	f, err := q.ForecastShare(r.Context(), views.Share{Now: now, Partitions: want})
	if err != nil {
		return err
	}
	if _, _, err := s.shareAsked(r, b, s.coverage); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, forecastShareJSON{ViewForecast: f, Share: true})
	return nil
}

// forecastShareJSON is a coverer's answer to a request for its share of a
// forecast (answerForecastShare): the forecast of the partitions asked for,
// marked with "share":true. A node of a build before the mark answers
// without it, possibly with its whole index's forecast (every partition it
// holds, replicas included); the merger names such a node in "errors"
// (errNotAForecastShare) rather than add rows it may count twice.
type forecastShareJSON struct {
	*views.ViewForecast
	// Share is true in this build's share answers.
	Share bool `json:"share"`
}

// errNotAForecastShare is the reason a merged forecast's "errors" list
// gives for a coverer whose answer is not marked as a share.
const errNotAForecastShare = "the node's answer is not a forecast share (a node of another build?); its counts are left out"

// fetchShare sends r, as a request for coverer c's share under coverage
// revision rev, to c, and returns its answer whole (valid JSON, status
// 200); failures as sendShare has them. For shares bounded by their
// request's limit (the console's listing); views and _all_docs read theirs
// as they arrive (openShare).
func (s *server) fetchShare(ctx context.Context, r *http.Request, c Coverer, rev, now int64, timeout time.Duration, body []byte) (gjson.Result, *views.NodeError, error) {
	var none gjson.Result
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, from, nerr, err := s.sendShare(ctx, r, c, rev, now, body)
	if nerr != nil || err != nil {
		return none, nerr, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxShareBody+1))
	switch {
	case err != nil:
		return none, &views.NodeError{From: from, Reason: transportReason(ctx, err)}, nil
	case len(data) > maxShareBody:
		return none, &views.NodeError{From: from, Reason: fmt.Sprintf("the node's answer is over %d bytes", maxShareBody)}, nil
	case !jsonstr.Valid(data):
		return none, &views.NodeError{From: from, Reason: "the node's answer is not JSON"}, nil
	}
	return gjson.ParseBytes(data), nil, nil
}

// openShare sends r, as a request for coverer c's share under coverage
// revision rev, to c, and reads its answer's head (status 200): the rows
// are read as they arrive, with the returned share's next, until the
// caller closes it. connection_timeout (timeout) bounds the wait for the
// head, and after it every wait for more of the answer. Failures as
// sendShare has them.
func (s *server) openShare(ctx context.Context, r *http.Request, c Coverer, rev, now int64, timeout time.Duration, body []byte) (*remoteShare, *views.NodeError, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	idle := time.AfterFunc(timeout, func() { cancel(errShareTimedOut) })
	resp, from, nerr, err := s.sendShare(ctx, r, c, rev, now, body)
	if nerr != nil || err != nil {
		idle.Stop()
		cancel(context.Canceled)
		return nil, nerr, err
	}
	idle.Stop()
	rs := &remoteShare{from: from, resp: resp, idle: idle, wait: timeout, ctx: ctx, close: cancel}
	rs.rd = &shareReader{src: rs}
	if err := rs.rd.head(); err != nil {
		rs.Close()
		reason := transportReason(ctx, err)
		if errors.Is(err, io.ErrUnexpectedEOF) {
			reason = "the node's answer is not JSON"
		}
		return nil, &views.NodeError{From: from, Reason: reason}, nil
	}
	return rs, nil, nil
}

// sendShare sends r, as a request for coverer c's share under coverage
// revision rev, to c, and returns its answer when its status is 200 (its
// body to read), from naming it. A coverer that cannot be reached, does
// not answer in time or answers another error is a *views.NodeError (the
// share is missing, named in the answer's errors); one that answers 409
// coverage_changed, or whose reduce failed (500 with a views.ReduceError's
// code: the view's data at fault, which fails the query as on one node),
// is err.
func (s *server) sendShare(ctx context.Context, r *http.Request, c Coverer, rev, now int64, body []byte) (resp *http.Response, from string, nerr *views.NodeError, err error) {
	if c.URL == "" {
		return nil, c.Name, &views.NodeError{From: c.Name, Reason: "node_down"}, nil
	}
	from = c.URL + r.URL.EscapedPath()
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
		return nil, from, &views.NodeError{From: from, Reason: err.Error()}, nil
	}
	if a := r.Header.Get("Authorization"); a != "" {
		req.Header.Set("Authorization", a)
		s.setUsersVersion(req.Header)
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	resp, err = s.shares.Do(req)
	if err != nil {
		return nil, from, &views.NodeError{From: from, Reason: transportReason(ctx, err)}, nil
	}
	if resp.StatusCode == http.StatusOK {
		return resp, from, nil, nil
	}
	// An error answer is small: read whole.
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody+1))
	switch {
	case err != nil:
		return nil, from, &views.NodeError{From: from, Reason: transportReason(ctx, err)}, nil
	case len(data) > maxErrorBody || !jsonstr.Valid(data):
		return nil, from, &views.NodeError{From: from, Reason: "the node's answer is not JSON"}, nil
	}
	ans := gjson.ParseBytes(data)
	if resp.StatusCode == http.StatusConflict && ans.Get("error").String() == "coverage_changed" {
		return nil, from, nil, fmt.Errorf("%w: %s", errCoverageChanged, ans.Get("reason").String())
	}
	reason := ans.Get("reason").String()
	if code := ans.Get("error").String(); resp.StatusCode == http.StatusInternalServerError && isReduceErrorCode(code) {
		return nil, from, nil, remoteReduceError(code, reason)
	}
	if reason == "" {
		reason = resp.Status
	}
	return nil, from, &views.NodeError{From: from, Reason: reason}, nil
}

// isReduceErrorCode says whether code is a views.ReduceError's, which a
// node answers with status 500 (classifyViews); its other 500s are
// internal_error or audit_failed.
func isReduceErrorCode(code string) bool {
	switch code {
	case "error", "reduce_error", "timeout", "memory_limit":
		return true
	}
	return false
}

// remoteReduceError is a coverer's failed reduce, as it answered it (its
// code and reason): a *views.ReduceError (views.ErrReduce), which fails
// the query with the same 500 and reason.
func remoteReduceError(code, reason string) error {
	return &views.ReduceError{Code: code, Reason: reason, Err: errors.New("another node's share: " + reason)}
}

// transportReason names a failed request to a coverer as Couchbase's
// errors list does.
func transportReason(ctx context.Context, err error) string {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded), errors.Is(context.Cause(ctx), errShareTimedOut):
		return "req_timedout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "econnrefused"
	}
	return err.Error()
}

// answerShare answers another node's request for this node's share of a
// view query: the rows of the partitions it asks for, at its instant, as
// they are read from the index (appendShareRow, through a bounded buffer);
// 409 coverage_changed when this node's coverage is not the one the other
// node read, or does not give it those partitions. The revision is read
// again once the index snapshot the rows come from is taken, before the
// first byte: a coverage moved meanwhile may have had the partitions this
// node no longer covers dropped from its indexes (views.Service.Cover)
// before the snapshot, and is coverage_changed too, never rows missing
// silently. A failure once the rows are on their way ends the answer
// without its closing bracket, the reason in its trailer.
func (s *server) answerShare(w http.ResponseWriter, r *http.Request, b *engine.Bucket, q *views.Query) error {
	want, now, err := s.shareAsked(r, b, s.coverage)
	if err != nil {
		return err
	}
	st, err := q.Stream(r.Context(), views.Share{Now: now, Partitions: want})
	if err != nil {
		return err
	}
	defer st.Close()
	if _, _, err := s.shareAsked(r, b, s.coverage); err != nil {
		return err
	}
	bw := bufio.NewWriterSize(shareWriter(w, q.Params().ConnectionTimeout()), 32<<10)
	bw.Write(beginShare(w, int64(st.TotalRows), ""))
	var line []byte
	for i := 0; ; i++ {
		row, err := st.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			bw.Flush()
			failShare(w, err)
			if r.Context().Err() == nil { // not the node asked closing the share early
				s.log.Warn("view share cut short", "bucket", b.Name(), "err", err)
			}
			return nil
		}
		line = line[:0]
		if i > 0 {
			line = append(line, ',')
		}
		line = appendShareRow(line, &row)
		if _, err := bw.Write(line); err != nil {
			return nil // the asking node went away
		}
	}
	bw.WriteString("]}")
	bw.Flush()
	return nil
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

// appendShareRow appends a row of a view share as JSON: {"s":seg,"id":...,
// "key":...,"value":...,"doc":...}, the raw JSON of the row as the index
// holds it. A share is {"total_rows":N,"rows":[ROW,...]}.
func appendShareRow(b []byte, r *views.PartialRow) []byte {
	b = append(b, `{"s":`...)
	b = strconv.AppendInt(b, int64(r.Seg), 10)
	if r.ID != "" {
		b = append(b, `,"id":`...)
		b = jsonstr.Append(b, r.ID)
	}
	b = append(b, `,"key":`...)
	b = append(b, r.Key...)
	b = append(b, `,"value":`...)
	b = append(b, r.Value...)
	if r.Doc != nil {
		b = append(b, `,"doc":`...)
		b = append(b, r.Doc...)
	}
	return append(b, '}')
}

// decodeShareRow reads a row appendShareRow wrote (valid JSON); its bytes
// are raw's.
func decodeShareRow(raw []byte) views.PartialRow {
	f := gjson.GetManyBytes(raw, "s", "id", "key", "value", "doc")
	row := views.PartialRow{Seg: int(f[0].Int()), ID: f[1].String(), Key: rawOf(raw, f[2]), Value: rawOf(raw, f[3])}
	if f[4].Exists() {
		row.Doc = rawOf(raw, f[4])
	}
	return row
}

// rawOf returns r's raw JSON as a slice of data, which r was read from
// (a copy when gjson does not say where).
func rawOf(data []byte, r gjson.Result) []byte {
	if r.Index > 0 && r.Index+len(r.Raw) <= len(data) {
		return data[r.Index : r.Index+len(r.Raw) : r.Index+len(r.Raw)]
	}
	return []byte(r.Raw)
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
