package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"

	"github.com/mayflydb/mayfly/audit"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/internal/cbstats"
	"github.com/mayflydb/mayfly/pager"
)

// pagerBucket returns the request's bucket name once the pager is known.
func (s *server) pagerBucket(r *http.Request) (string, error) {
	if s.pager == nil {
		return "", errNotFound("the expiry pager is not running")
	}
	b, err := s.bucketOf(r)
	if err != nil {
		return "", err
	}
	return b.Name(), nil
}

// getExpiryPager handles GET .../settings/expiryPager.
func (s *server) getExpiryPager(w http.ResponseWriter, r *http.Request) error {
	name, err := s.pagerBucket(r)
	if err != nil {
		return err
	}
	st, err := s.pager.Settings(name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}

// setExpiryPager handles POST .../settings/expiryPager with exp_pager_stime
// and/or exp_pager_initial_run_time: validated, persisted, audited, and the
// next run rescheduled at once.
func (s *server) setExpiryPager(w http.ResponseWriter, r *http.Request) error {
	name, err := s.pagerBucket(r)
	if err != nil {
		return err
	}
	_, vals, err := s.bucketForm(r)
	if err != nil {
		return err
	}
	var stime *int64
	var hour *int
	if v, ok, err := intParam(vals, "exp_pager_stime"); err != nil {
		return err
	} else if ok {
		stime = &v
	}
	if v, ok, err := intParam(vals, "exp_pager_initial_run_time"); err != nil {
		return err
	} else if ok {
		h := int(v)
		if int64(h) != v {
			return errBadRequest("exp_pager_initial_run_time: must be an hour from -1 to 23")
		}
		hour = &h
	}
	if stime == nil && hour == nil {
		return errBadRequest("give exp_pager_stime and/or exp_pager_initial_run_time")
	}
	// Validated here as the pager does, so a refused value is not recorded.
	if stime != nil && *stime < 0 {
		return errBadRequest("exp_pager_stime: must be 0 (disabled) or a whole number of seconds")
	}
	if hour != nil && (*hour < -1 || *hour > 23) {
		return errBadRequest("exp_pager_initial_run_time: must be an hour (UTC) from 0 to 23, or -1 for none")
	}
	cur, err := s.pager.Settings(name)
	if err != nil {
		return err
	}
	before, after := map[string]any{}, map[string]any{}
	if stime != nil && *stime != cur.ExpPagerStime {
		before["exp_pager_stime"], after["exp_pager_stime"] = cur.ExpPagerStime, *stime
	}
	if hour != nil && *hour != cur.ExpPagerInitialRunTime {
		before["exp_pager_initial_run_time"], after["exp_pager_initial_run_time"] = cur.ExpPagerInitialRunTime, *hour
	}
	var in audit.Intent
	if len(after) > 0 {
		// before is read just ahead of the change: a concurrent change of
		// the same setting in between would make it stale.
		if in, err = s.intend(r, audit.Event{Action: audit.ActionPagerSettings, Bucket: name, Before: before, After: after}); err != nil {
			return err
		}
	}
	_, updated, err := s.pager.UpdateSettings(r.Context(), name, stime, hour)
	if err != nil {
		s.settle(r, in, err)
		return err
	}
	writeJSON(w, http.StatusOK, updated)
	return nil
}

// runExpiryPager handles POST .../controller/runExpiryPager: a run now,
// answered with what it purged.
func (s *server) runExpiryPager(w http.ResponseWriter, r *http.Request) error {
	name, err := s.pagerBucket(r)
	if err != nil {
		return err
	}
	res, err := s.pager.RunNow(r.Context(), name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// bucketStats gathers a bucket's statistics under their cbstats names, and
// each full-text index's as fts_INDEX_STAT (see
// searchIndexStats).
func (s *server) bucketStats(ctx context.Context, name string) (map[string]int64, error) {
	out, idx, err := s.statsOf(ctx, name)
	if err != nil {
		return nil, err
	}
	for index, st := range idx {
		for stat, v := range st {
			out[ftsStatName(index, stat)] = v
		}
	}
	return out, nil
}

// statsOf gathers a bucket's statistics under their cbstats names, and its
// full-text indexes' by index.
func (s *server) statsOf(ctx context.Context, name string) (map[string]int64, map[string]map[string]int64, error) {
	b, err := s.eng.Bucket(name)
	if err != nil {
		return nil, nil, err
	}
	out := s.coreStats(b)
	var idx map[string]map[string]int64
	if s.search != nil {
		// A memcached bucket has no indexes; one being opened or deleted
		// has none yet.
		idx, _ = searchIndexStats(ctx, s.search, name)
	}
	return out, idx, nil
}

// coreStats are a bucket's engine and pager statistics under their cbstats
// names (package cbstats, shared with the KV port's STAT).
func (s *server) coreStats(b *engine.Bucket) map[string]int64 {
	var ps cbstats.PagerStats
	if s.pager != nil {
		ps = s.pager.Stats
	}
	return cbstats.Bucket(b, ps)
}

// ftsStatName is the bucket statistic of a full-text index's stat.
func ftsStatName(index, stat string) string { return "fts_" + index + "_" + stat }

// getStats handles GET /pools/default/buckets/{bucket}/stats.
func (s *server) getStats(w http.ResponseWriter, r *http.Request) error {
	b, err := s.bucketOf(r)
	if err != nil {
		return err
	}
	st, err := s.bucketStats(r.Context(), b.Name())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}

// getWarmupStats handles GET /pools/default/buckets/{bucket}/stats/warmup:
// Couchbase's warmup group (cbstats warmup) as its words and numbers,
// ep_warmup_state and ep_warmup_thread among them, which the numeric
// statistics of .../stats cannot hold.
func (s *server) getWarmupStats(w http.ResponseWriter, r *http.Request) error {
	b, err := s.bucketOf(r)
	if err != nil {
		return err
	}
	out := map[string]string{}
	for _, l := range cbstats.Warmup(b.WarmupStats()) {
		out[l[0]] = l[1]
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// classifyPager maps the pager's errors.
func classifyPager(err error) *httpError {
	switch {
	case errors.Is(err, pager.ErrInvalidSetting):
		return &httpError{http.StatusBadRequest, "bad_request", strings.TrimPrefix(err.Error(), "pager: ")}
	case errors.Is(err, pager.ErrClosed):
		return &httpError{http.StatusServiceUnavailable, "unavailable", err.Error()}
	}
	return nil
}

// DefaultPagerRuns is the runs a PagerRuns keeps per bucket by default: a
// day of runs every five minutes.
const DefaultPagerRuns = 288

// PagerRuns remembers the latest expiry pager runs of each bucket, in
// memory, for GET /{bucket}/_expiry/runs (the web console's chart of what
// each run purged). Pass its RunEnd as pager.Events.RunEnd. It is safe for
// concurrent use.
type PagerRuns struct {
	max int
	mu  sync.Mutex
	by  map[string][]pager.RunResult // oldest first, at most max
}

// NewPagerRuns returns a PagerRuns keeping the last max runs of each bucket
// (DefaultPagerRuns if max <= 0).
func NewPagerRuns(max int) *PagerRuns {
	if max <= 0 {
		max = DefaultPagerRuns
	}
	return &PagerRuns{max: max, by: map[string][]pager.RunResult{}}
}

// RunEnd records a run of bucket's pager, dropping the oldest beyond the
// limit.
func (p *PagerRuns) RunEnd(bucket string, r pager.RunResult) {
	p.mu.Lock()
	defer p.mu.Unlock()
	runs := append(p.by[bucket], r)
	if len(runs) > p.max {
		runs = append(runs[:0:0], runs[len(runs)-p.max:]...)
	}
	p.by[bucket] = runs
}

// Runs returns bucket's recorded runs, oldest first.
func (p *PagerRuns) Runs(bucket string) []pager.RunResult {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]pager.RunResult{}, p.by[bucket]...)
}

// forget drops a deleted bucket's runs, so one created under its name starts
// afresh.
func (p *PagerRuns) forget(bucket string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.by, bucket)
}

// pagerRuns handles GET /{bucket}/_expiry/runs: the pager's recent runs,
// oldest first, and the engine clock's now. Without a PagerRuns only the
// last run is known.
func (s *server) pagerRuns(w http.ResponseWriter, r *http.Request) error {
	name, err := s.pagerBucket(r)
	if err != nil {
		return err
	}
	runs := []pager.RunResult{}
	if s.runs != nil {
		runs = s.runs.Runs(name)
	} else if st, err := s.pager.Settings(name); err == nil && st.LastRun != nil {
		runs = append(runs, *st.LastRun)
	}
	writeJSON(w, http.StatusOK, map[string]any{"now": s.eng.Clock().Now(), "runs": runs})
	return nil
}
