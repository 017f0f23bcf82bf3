package httpapi

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"time"
)

// Defaults of NewStatsHistory: ten minutes of samples three seconds apart,
// what the web console's charts show.
const (
	DefaultStatsSamples  = 200
	DefaultStatsInterval = 3 * time.Second
)

// historyStats are the statistics a StatsHistory keeps: those the web
// console charts.
var historyStats = []string{
	"curr_items", "ep_items_with_expiry", "ep_expired_unpurged", "ep_expired",
	"ep_expired_access", "ep_expired_pager", "ep_queue_size", "ep_tombstones",
	"mem_used", "vb_active_perc_mem_resident", "ep_num_value_ejects", "ep_bg_fetched",
}

// StatsHistory keeps the last samples of each bucket's main statistics, in
// memory, for GET /pools/default/buckets/{bucket}/stats/history, so that the
// web console's charts open with the last minutes drawn rather than one
// point. Memory is bounded: at most keep samples of a few counters per
// bucket, and a deleted bucket's samples go at the next sample. The samples
// are kept by the bucket's incarnation (its name and its settings' UUID),
// so a bucket deleted and created again under its name, even between two
// samples, starts with none of the old one's.
//
// Give it to New (Options.StatsHistory), then Run it; it samples the
// buckets of the last server New built with it. It is safe for concurrent
// use.
type StatsHistory struct {
	keep  int
	every time.Duration
	now   func() time.Time // the samples' timestamps

	mu     sync.Mutex
	sample func() map[bucketID][]int64 // historyStats of every bucket; set by New
	by     map[bucketID]*statsRing
}

// bucketID names one incarnation of a bucket: its name and its settings'
// UUID, which a bucket created again under the name does not share.
type bucketID struct{ name, uuid string }

// statsRing is one bucket's samples, oldest first.
type statsRing struct {
	times []int64   // Unix milliseconds
	vals  [][]int64 // vals[i][j]: historyStats[j] at times[i], then mutations
}

// mutationsCol is the column of vals after historyStats: the bucket's
// mutations so far (its partitions' high sequence numbers added up), kept
// for basicStats.opsPerSec and not shown in the samples.
func mutationsCol() int { return len(historyStats) }

// NewStatsHistory returns a history keeping keep samples of each bucket
// (DefaultStatsSamples if keep <= 0), taken every interval by Run
// (DefaultStatsInterval if interval <= 0).
func NewStatsHistory(keep int, interval time.Duration) *StatsHistory {
	if keep <= 0 {
		keep = DefaultStatsSamples
	}
	if interval <= 0 {
		interval = DefaultStatsInterval
	}
	return &StatsHistory{keep: keep, every: interval, now: time.Now, by: map[bucketID]*statsRing{}}
}

// bind makes h sample s's buckets.
func (h *StatsHistory) bind(s *server) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sample = func() map[bucketID][]int64 {
		out := map[bucketID][]int64{}
		for _, b := range s.eng.Buckets() {
			st := s.coreStats(b)
			vals := make([]int64, len(historyStats)+1)
			for j, name := range historyStats {
				vals[j] = st[name]
			}
			for _, seq := range b.HighSeqnos() {
				vals[mutationsCol()] += int64(seq)
			}
			out[bucketID{b.Name(), b.Settings().UUID}] = vals
		}
		return out
	}
}

// Run takes a sample every interval until ctx ends. It returns ctx's error.
func (h *StatsHistory) Run(ctx context.Context) error {
	t := time.NewTicker(h.every)
	defer t.Stop()
	for {
		h.Sample()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Sample takes one sample of every bucket now, dropping the oldest beyond
// the limit and the samples of buckets that are gone (a bucket created
// again under a gone one's name is another bucket). Run calls it; a test
// may call it directly.
func (h *StatsHistory) Sample() {
	h.mu.Lock()
	sample := h.sample
	h.mu.Unlock()
	if sample == nil {
		return
	}
	got := sample() // outside the lock: it reads every bucket
	ms := h.now().UnixMilli()
	h.mu.Lock()
	defer h.mu.Unlock()
	for id := range h.by {
		if _, ok := got[id]; !ok {
			delete(h.by, id)
		}
	}
	for id, vals := range got {
		r := h.by[id]
		if r == nil {
			r = &statsRing{}
			h.by[id] = r
		}
		r.times = append(r.times, ms)
		r.vals = append(r.vals, vals)
		if n := len(r.times); n > h.keep {
			r.times = append(r.times[:0:0], r.times[n-h.keep:]...)
			r.vals = append(r.vals[:0:0], r.vals[n-h.keep:]...)
		}
	}
}

// rates returns the bucket incarnation's mutations and values read back
// from disk (ep_bg_fetched) per second between its last two samples, as
// Couchbase's basicStats.opsPerSec and diskFetches give its last sample's
// rates: 0 without two samples (or a StatsHistory), and 0 for a count that
// went back (a rollback's sequence numbers).
func (h *StatsHistory) rates(id bucketID) (ops, fetches float64) {
	if h == nil {
		return 0, 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.by[id]
	if r == nil || len(r.times) < 2 {
		return 0, 0
	}
	n := len(r.times)
	secs := float64(r.times[n-1]-r.times[n-2]) / 1000
	if secs <= 0 {
		return 0, 0
	}
	rate := func(col int) float64 {
		return max(0, float64(r.vals[n-1][col]-r.vals[n-2][col])/secs)
	}
	return rate(mutationsCol()), rate(slices.Index(historyStats, "ep_bg_fetched"))
}

// statsHistoryJSON is Couchbase's shape of a bucket's stats samples:
// {"op":{"samples":{"timestamp":[ms…],"curr_items":[…],…},"samplesCount",
// "lastTStamp","interval"}}, plus now, the server's time of the answer (Unix
// ms), so that a client can place the samples on its own clock.
type statsHistoryJSON struct {
	Op struct {
		Samples      map[string][]int64 `json:"samples"`
		SamplesCount int                `json:"samplesCount"`
		LastTStamp   int64              `json:"lastTStamp"`
		Interval     int64              `json:"interval"`
		Now          int64              `json:"now"`
	} `json:"op"`
}

// of returns the samples of the bucket incarnation in Couchbase's shape:
// none of a deleted bucket whose name it took.
func (h *StatsHistory) of(bucket bucketID) statsHistoryJSON {
	var out statsHistoryJSON
	out.Op.Samples = map[string][]int64{"timestamp": {}}
	for _, name := range historyStats {
		out.Op.Samples[name] = []int64{}
	}
	if h == nil {
		out.Op.Now = time.Now().UnixMilli() // wall clock: the answer's time, as the samples'
		return out
	}
	out.Op.Interval = h.every.Milliseconds()
	out.Op.Now = h.now().UnixMilli()
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.by[bucket]
	if r == nil {
		return out
	}
	out.Op.Samples["timestamp"] = append([]int64{}, r.times...)
	for j, name := range historyStats {
		col := make([]int64, len(r.vals))
		for i, v := range r.vals {
			col[i] = v[j]
		}
		out.Op.Samples[name] = col
	}
	out.Op.SamplesCount = len(r.times)
	out.Op.LastTStamp = r.times[len(r.times)-1]
	return out
}

// getStatsHistory handles GET /pools/default/buckets/{bucket}/stats/history:
// the bucket's recent samples (none when no StatsHistory runs).
func (s *server) getStatsHistory(w http.ResponseWriter, r *http.Request) error {
	b, err := s.bucketOf(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.history.of(bucketID{b.Name(), b.Settings().UUID}))
	return nil
}
