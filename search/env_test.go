package search_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/search"
)

const t0 = 1_700_000_000 // a fixed "now" for tests

// env is an engine on a temporary folder with one bucket, "default", and the
// search service over it.
type env struct {
	t    testing.TB
	dir  string
	clk  *engine.FakeClock
	typ  engine.BucketType
	opts search.Options
	eng  *engine.Engine
	svc  *search.Service
}

func newEnv(t testing.TB, typ engine.BucketType, opts search.Options) *env {
	e := &env{t: t, dir: t.TempDir(), clk: engine.NewFakeClock(t0), typ: typ, opts: opts}
	e.open()
	t.Cleanup(e.close)
	return e
}

func (e *env) open() {
	e.t.Helper()
	var err error
	if e.eng, err = engine.Open(e.dir, &engine.Options{Clock: e.clk, NumPartitions: 16, NoSync: true}); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.eng.Bucket("default"); err != nil {
		s := engine.DefaultBucketSettings("default")
		s.Type = e.typ
		if _, err := e.eng.CreateBucket(context.Background(), s); err != nil {
			e.t.Fatal(err)
		}
	}
	if e.svc, err = search.New(context.Background(), e.eng, &e.opts); err != nil {
		e.t.Fatal(err)
	}
}

// close checks the indexes against the bucket and closes everything.
func (e *env) close() {
	e.t.Helper()
	if e.svc != nil {
		if err := e.svc.Check(context.Background()); err != nil && !errors.Is(err, search.ErrClosed) {
			e.t.Errorf("search.Check: %v", err)
		}
		if err := e.svc.Close(); err != nil {
			e.t.Errorf("search.Close: %v", err)
		}
		e.svc = nil
	}
	if e.eng != nil {
		if err := e.eng.Check(context.Background()); err != nil && !errors.Is(err, engine.ErrClosed) {
			e.t.Errorf("engine.Check: %v", err)
		}
		if err := e.eng.Close(); err != nil {
			e.t.Errorf("engine.Close: %v", err)
		}
		e.eng = nil
	}
}

func (e *env) bucket() *engine.Bucket {
	b, err := e.eng.Bucket("default")
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

func (e *env) put(key, value string, expiry int64) {
	e.t.Helper()
	if _, err := e.bucket().DefaultCollection().Upsert(context.Background(), key, []byte(value), &engine.WriteOptions{Expiry: expiry}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) del(key string) {
	e.t.Helper()
	if _, err := e.bucket().DefaultCollection().Delete(context.Background(), key, nil); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) createIndex(name, def string) {
	e.t.Helper()
	if _, err := e.svc.PutIndex(context.Background(), "default", name, []byte(def)); err != nil {
		e.t.Fatal(err)
	}
}

// answer is the part of a search answer tests look at.
type answer struct {
	Status struct {
		Total, Failed, Successful int
	} `json:"status"`
	Hits []struct {
		Index     string                                  `json:"index"`
		ID        string                                  `json:"id"`
		Score     float64                                 `json:"score"`
		Fields    map[string]any                          `json:"fields"`
		Fragments map[string][]string                     `json:"fragments"`
		Locations map[string]map[string][]json.RawMessage `json:"locations"`
		Sort      []string                                `json:"sort"`
	} `json:"hits"`
	TotalHits uint64                     `json:"total_hits"`
	MaxScore  float64                    `json:"max_score"`
	Took      int64                      `json:"took"`
	Facets    map[string]json.RawMessage `json:"facets"`
	Request   json.RawMessage            `json:"request"`
}

func (a *answer) ids() []string {
	out := []string{}
	for _, h := range a.Hits {
		out = append(out, h.ID)
	}
	return out
}

// query runs req (at_plus unless it says otherwise) on index and decodes
// the answer.
func (e *env) query(index, req string) *answer {
	e.t.Helper()
	raw, err := e.svc.Query(context.Background(), "default", index, []byte(req))
	if err != nil {
		e.t.Fatalf("query %s: %v", req, err)
	}
	var a answer
	if err := json.Unmarshal(raw, &a); err != nil {
		e.t.Fatalf("answer %s: %v", raw, err)
	}
	return &a
}
