package views_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/internal/racebuild"
	"github.com/mayflydb/mayfly/views"
)

// modelDoc is a document of TestViewsExpiryModel's model: the view emits
// [a, b] with value n*factor, and a with value factor when two.
type modelDoc struct {
	a   int
	b   string
	n   int
	two bool
	exp int64 // absolute expiration, 0 for none
}

// modelRow is a row of the model's view.
type modelRow struct {
	key any // float64, or []any{float64, string}
	id  string
	ord int // emit order within the document
	val float64
	exp int64
	seg int // with keys=, the index of the key it answers
}

// modelCompare collates the model's keys (numbers, and arrays of a number
// and a lowercase string, whose collation is byte order).
func modelCompare(x, y any) int {
	switch xv := x.(type) {
	case float64:
		if yv, ok := y.(float64); ok {
			return cmp.Compare(xv, yv)
		}
		return -1
	case []any:
		yv, ok := y.([]any)
		if !ok {
			return 1
		}
		for i := 0; i < len(xv) && i < len(yv); i++ {
			var c int
			switch e := xv[i].(type) {
			case float64:
				c = modelCompare(e, yv[i])
			case string:
				c = strings.Compare(e, yv[i].(string))
			}
			if c != 0 {
				return c
			}
		}
		return cmp.Compare(len(xv), len(yv))
	}
	panic("key")
}

// TestViewsExpiryModel checks view answers against a model through random
// histories: documents written with and without expirations, deleted,
// touched (expiry extended or removed), read (an expired one is purged
// lazily), expiry pager runs, clock moves, restarts and design document
// replacements; queried (stale=false) with key ranges, doc id bounds,
// inclusive_end, descending, keys, skip, limit, group and group_level,
// include_docs, expired=exclude and forecast, on map, _count, _sum, _stats
// and JavaScript reduce views. An expired document's rows stay in answers
// (expired=include) until it is purged, with "doc": null.
func TestViewsExpiryModel(t *testing.T) {
	// The views service's goroutines (the feed's, the builds'): three seeds
	// under -race, all twelve without it.
	for seed := uint64(1); seed <= uint64(racebuild.Scale(12)); seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runExpiryModel(t, seed, 30) })
	}
	// Enough documents for trees of many nodes, whose cached live
	// reductions are at stake as documents expire: one seed (seeds 101-115
	// passed when it was written). It is sequential work on the small
	// seeds' goroutines, 28 of the test's 32 CPU-s under the race
	// detector: it runs in the norace step only.
	t.Run("100", func(t *testing.T) {
		racebuild.Skip(t)
		runExpiryModel(t, 100, 3000)
	})
}

// runExpiryModel runs one random history over nDocs document ids.
func runExpiryModel(t *testing.T, seed uint64, nDocs int) {
	rng := rand.New(rand.NewPCG(seed, 7))
	e := newEnv(t, views.Options{})
	ctx := context.Background()
	factor := 1
	putDD := func() {
		m := fmt.Sprintf(`function (doc, meta) { emit([doc.a, doc.b], doc.n * %d); if (doc.two) emit(doc.a, %d); }`, factor, factor)
		if _, err := e.svc.PutDesignDoc(ctx, "default", "d", []byte(`{"views":{
	"m":{"map":"`+m+`"},
	"s":{"map":"`+m+`","reduce":"_sum"},
	"c":{"map":"`+m+`","reduce":"_count"},
	"j":{"map":"`+m+`","reduce":"function(k,v,r){ return sum(v); }"},
	"st":{"map":"`+m+`","reduce":"_stats"}}}`)); err != nil {
			t.Fatal(err)
		}
	}
	putDD()
	docs := map[string]*modelDoc{}
	now := func() int64 { return e.clk.Now() }
	live := func(d *modelDoc) bool { return d.exp == 0 || d.exp > now() }
	bs := []string{"x", "y", "z"}
	steps := 300
	if nDocs > 100 {
		steps += nDocs
	}
	for step := 0; step < steps; step++ {
		id := fmt.Sprintf("d%04d", rng.IntN(nDocs))
		op := rng.IntN(10)
		if step < nDocs && nDocs > 100 {
			id, op = fmt.Sprintf("d%04d", step), 0 // fill first
		}
		switch {
		case op < 4:
			d := &modelDoc{a: rng.IntN(4), b: bs[rng.IntN(3)], n: rng.IntN(10), two: rng.IntN(3) == 0}
			var exp int64
			if rng.IntN(2) == 0 {
				exp = int64(1 + rng.IntN(40))
				d.exp = now() + exp
			}
			v := fmt.Sprintf(`{"a":%d,"b":%q,"n":%d,"two":%v}`, d.a, d.b, d.n, d.two)
			if _, err := e.coll().Upsert(ctx, id, []byte(v), &engine.WriteOptions{Expiry: exp}); err != nil {
				t.Fatal(err)
			}
			docs[id] = d
		case op == 4:
			if d, ok := docs[id]; ok && live(d) {
				if _, err := e.coll().Delete(ctx, id, nil); err != nil {
					t.Fatal(err)
				}
				delete(docs, id)
			}
		case op == 5:
			if d, ok := docs[id]; ok && live(d) {
				var exp int64
				if rng.IntN(3) > 0 {
					exp = int64(1 + rng.IntN(40))
				}
				if _, err := e.coll().Touch(ctx, id, exp); err != nil {
					t.Fatal(err)
				}
				d.exp = 0
				if exp != 0 {
					d.exp = now() + exp
				}
			}
		case op == 9 && rng.IntN(3) == 0:
			_, err := e.coll().Get(ctx, id)
			if d, ok := docs[id]; ok && live(d) {
				if err != nil {
					t.Fatal(err)
				}
			} else {
				if err == nil {
					t.Fatalf("get %s: found", id)
				}
				delete(docs, id)
			}
		case op == 9 && rng.IntN(6) == 0:
			factor = 3 - factor
			putDD()
		case op == 6:
			e.clk.Advance(int64(1 + rng.IntN(10)))
		case op == 8 && rng.IntN(8) == 0:
			e.close()
			e.open()
		case op == 7 && rng.IntN(3) == 0:
			b, _ := e.eng.Bucket("default")
			for {
				_, more, err := b.ExpireBatch(ctx, 7)
				if err != nil {
					t.Fatal(err)
				}
				if !more {
					break
				}
			}
			for id, d := range docs {
				if !live(d) {
					delete(docs, id)
				}
			}
		default:
			modelQuery(t, e, rng, docs, now(), float64(factor), nDocs)
		}
	}
}

func modelQuery(t *testing.T, e *env, rng *rand.Rand, docs map[string]*modelDoc, now int64, f float64, nDocs int) {
	t.Helper()
	var rows []modelRow
	for id, d := range docs {
		rows = append(rows, modelRow{key: []any{float64(d.a), d.b}, id: id, ord: 0, val: float64(d.n) * f, exp: d.exp})
		if d.two {
			rows = append(rows, modelRow{key: float64(d.a), id: id, ord: 1, val: f, exp: d.exp})
		}
	}
	slices.SortFunc(rows, func(x, y modelRow) int {
		if c := modelCompare(x.key, y.key); c != 0 {
			return c
		}
		if c := strings.Compare(x.id, y.id); c != 0 {
			return c
		}
		return cmp.Compare(x.ord, y.ord)
	})
	keyPool := []string{"0", "1", "2", "3", "[0]", "[1,\"y\"]", "[2,\"x\"]", "[3,\"z\"]", "[1]", "[2,\"zz\"]", "[]"}
	var params []string
	forecast := rng.IntN(6) == 0 // which ignores expired=
	if !forecast && rng.IntN(2) == 0 {
		params = append(params, "expired=exclude")
		rows = slices.DeleteFunc(rows, func(r modelRow) bool { return r.exp != 0 && r.exp <= now })
	}
	total := len(rows)
	desc := rng.IntN(2) == 0
	if desc {
		params = append(params, "descending=true")
		slices.Reverse(rows)
	}
	var sk, ek any
	incl := true
	if rng.IntN(2) == 0 {
		s := keyPool[rng.IntN(len(keyPool))]
		params = append(params, "startkey="+s)
		json.Unmarshal([]byte(s), &sk)
	}
	if rng.IntN(2) == 0 {
		s := keyPool[rng.IntN(len(keyPool))]
		params = append(params, "endkey="+s)
		json.Unmarshal([]byte(s), &ek)
	}
	if sk != nil && ek != nil {
		c := modelCompare(sk, ek)
		if desc && c < 0 || !desc && c > 0 {
			sk, ek = ek, sk
			params[len(params)-2], params[len(params)-1] = "startkey="+toJSON(sk), "endkey="+toJSON(ek)
		}
	}
	if rng.IntN(3) == 0 {
		incl = false
		params = append(params, "inclusive_end=false")
	}
	sdid, edid := "", ""
	if sk != nil && rng.IntN(2) == 0 {
		sdid = fmt.Sprintf("d%04d", rng.IntN(nDocs))
		params = append(params, "startkey_docid="+sdid)
	}
	if ek != nil && rng.IntN(2) == 0 {
		edid = fmt.Sprintf("d%04d", rng.IntN(nDocs))
		params = append(params, "endkey_docid="+edid)
	}
	if sk != nil && ek != nil && modelCompare(sk, ek) == 0 && sdid != "" && edid != "" && (!desc && sdid > edid || desc && sdid < edid) {
		sdid, edid = edid, sdid
		params[len(params)-2], params[len(params)-1] = "startkey_docid="+sdid, "endkey_docid="+edid
	}
	sel := rows[:0:0]
	for _, r := range rows {
		dir := 1
		if desc {
			dir = -1
		}
		if sk != nil {
			c := dir * modelCompare(r.key, sk)
			if c == 0 && sdid != "" {
				c = dir * strings.Compare(r.id, sdid)
			}
			if c < 0 {
				continue
			}
		}
		if ek != nil {
			c := dir * modelCompare(r.key, ek)
			if c == 0 && edid != "" {
				c = dir * strings.Compare(r.id, edid)
			}
			if c > 0 || c == 0 && !incl {
				continue
			}
		}
		sel = append(sel, r)
	}
	view := []string{"m", "s", "c", "j", "st"}[rng.IntN(5)]
	reduce := view != "m" && rng.IntN(4) > 0
	body := ""
	if rng.IntN(4) == 0 {
		// keys= replaces the key range and its doc id bounds.
		params = slices.DeleteFunc(params, func(p string) bool {
			return strings.HasPrefix(p, "startkey") || strings.HasPrefix(p, "endkey")
		})
		var ks []string
		sel = sel[:0]
		for seg := range rng.IntN(4) {
			k := keyPool[rng.IntN(len(keyPool))]
			ks = append(ks, k)
			var kv any
			json.Unmarshal([]byte(k), &kv)
			for _, r := range rows {
				if modelCompare(r.key, kv) == 0 {
					r.seg = seg
					sel = append(sel, r)
				}
			}
		}
		body = `{"keys":[` + strings.Join(ks, ",") + `]}`
	}
	if forecast {
		const interval, horizon = 10, 45
		params = append(params, fmt.Sprintf("forecast=%d&horizon=%d", interval, horizon))
		if view != "m" && !reduce {
			params = append(params, "reduce=false")
		}
		want := make([]int64, 1+(horizon+interval-1)/interval) // [0]: expired, not purged
		for _, r := range sel {
			switch {
			case r.exp == 0 || r.exp > now+horizon:
			case r.exp <= now:
				want[0]++
			default:
				want[1+(r.exp-now-1)/interval]++
			}
		}
		q := strings.Join(append(params, "stale=false"), "&")
		ans := e.tryQuery("d", view, q, body)
		var got views.ViewForecast
		if err := json.Unmarshal([]byte(ans), &got); err != nil {
			t.Fatalf("%s ?%s %s: %s", view, q, body, ans)
		}
		gotRows := []int64{got.ExpiredUnpurged.Rows}
		for _, iv := range got.Intervals {
			gotRows = append(gotRows, iv.Rows)
		}
		if !slices.Equal(gotRows, want) {
			t.Fatalf("now=%d %s ?%s %s: rows by interval %v, want %v: %s", now, view, q, body, gotRows, want, ans)
		}
		return
	}
	incDocs := !reduce && rng.IntN(3) == 0
	if incDocs {
		params = append(params, "include_docs=true")
	}
	if view != "m" && !reduce {
		params = append(params, "reduce=false")
	}
	skip, limit := 0, -1
	if rng.IntN(3) == 0 {
		skip = rng.IntN(4)
		params = append(params, fmt.Sprint("skip=", skip))
	}
	if rng.IntN(3) == 0 {
		limit = rng.IntN(6)
		params = append(params, fmt.Sprint("limit=", limit))
	}
	type out struct {
		key any
		val any
		id  string
	}
	var want []out
	if !reduce {
		for _, r := range sel {
			want = append(want, out{key: r.key, val: r.val, id: r.id})
		}
	} else {
		level := -2 // none
		lv := rng.IntN(3)
		if body != "" {
			lv = 1
		}
		switch lv {
		case 1:
			level = -1
			params = append(params, "group=true")
		case 2:
			level = rng.IntN(3)
			params = append(params, fmt.Sprint("group_level=", level))
		}
		gk := func(k any) any {
			switch level {
			case -2, 0:
				return nil
			case -1:
				return k
			}
			if a, ok := k.([]any); ok && len(a) > level {
				return a[:level]
			}
			return k
		}
		lastSeg := -1
		var vals [][]float64
		for _, r := range sel {
			g := gk(r.key)
			v := r.val
			if view == "c" {
				v = 1
			}
			if r.seg != lastSeg || len(want) == 0 || !reflect.DeepEqual(want[len(want)-1].key, g) {
				lastSeg = r.seg
				want = append(want, out{key: g})
				vals = append(vals, nil)
			}
			vals[len(vals)-1] = append(vals[len(vals)-1], v)
		}
		for i, vs := range vals {
			var sum, sq float64
			mn, mx := vs[0], vs[0]
			for _, v := range vs {
				sum += v
				sq += v * v
				mn, mx = min(mn, v), max(mx, v)
			}
			want[i].val = sum
			if view == "st" {
				want[i].val = map[string]any{"sum": sum, "count": float64(len(vs)), "min": mn, "max": mx, "sumsqr": sq}
			}
		}
	}
	if skip < len(want) {
		want = want[skip:]
	} else {
		want = nil
	}
	if limit >= 0 && limit < len(want) {
		want = want[:limit]
	}
	params = append(params, "stale=false")
	q := strings.Join(params, "&")
	ans := e.tryQuery("d", view, q, body)
	var got struct {
		TotalRows *int `json:"total_rows"`
		Rows      []struct {
			ID    string `json:"id"`
			Key   any    `json:"key"`
			Value any    `json:"value"`
			Doc   *struct {
				JSON map[string]any `json:"json"`
			} `json:"doc"`
		} `json:"rows"`
	}
	if err := json.Unmarshal([]byte(ans), &got); err != nil {
		t.Fatalf("%s %s: %s", view, q, ans)
	}
	var gotOut []out
	for _, r := range got.Rows {
		gotOut = append(gotOut, out{key: r.Key, val: r.Value, id: r.ID})
		if incDocs {
			d := docs[r.ID]
			wantNull := d == nil || d.exp != 0 && d.exp <= now
			if (r.Doc == nil) != wantNull || r.Doc != nil && r.Doc.JSON["n"] != float64(d.n) {
				t.Fatalf("now=%d %s ?%s %s: doc of %s: %s (model %+v)", now, view, q, body, r.ID, ans, d)
			}
		}
	}
	if !(len(gotOut) == 0 && len(want) == 0 || reflect.DeepEqual(gotOut, want)) || !reduce && (got.TotalRows == nil || *got.TotalRows != total) {
		t.Fatalf("now=%d %s ?%s %s:\n got  %s\n want %v total %d", now, view, q, body, ans, want, total)
	}
}

func toJSON(v any) string { b, _ := json.Marshal(v); return string(b) }

// tryQuery runs a view query with a POST body (may be empty) and returns
// its answer with line breaks removed, or the error in its place.
func (e *env) tryQuery(ddoc, view, params, body string) string {
	q, _ := url.ParseQuery(params)
	var b []byte
	if body != "" {
		b = []byte(body)
	}
	p, err := views.ParseParams(q, b)
	if err != nil {
		return "error: " + err.Error()
	}
	prep, err := e.svc.Prepare(context.Background(), "default", ddoc, view, p)
	if err != nil {
		return "error: " + err.Error()
	}
	var buf bytes.Buffer
	if err := prep.Run(context.Background(), &buf); err != nil {
		return "error: " + err.Error()
	}
	return strings.NewReplacer("\r\n", "", "\n", "").Replace(buf.String())
}
