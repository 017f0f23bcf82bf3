package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/mayflydb/mayfly/engine"
)

// Browsing a collection's documents in key order (Couchbase's document
// listing); see engine.Collection.Keys for its cost.
const (
	browseDefaultLimit = 100
	browseMaxLimit     = 10_000
)

// browseRow is one document of a listing.
type browseRow struct {
	ID         string         `json:"id"`
	Rev        string         `json:"rev"`
	CAS        uint64         `json:"cas"`
	Expiration int64          `json:"expiration"`
	Flags      uint32         `json:"flags"`
	Type       string         `json:"type"`
	Doc        map[string]any `json:"doc,omitempty"`
}

// browseKey reads startkey or endkey: a JSON string ("\"a\"", as Couchbase's
// UI sends it) or the key as it is.
func browseKey(q url.Values, name string) (string, error) {
	v := q.Get(name)
	if strings.HasPrefix(v, `"`) {
		var s string
		if err := json.Unmarshal([]byte(v), &s); err != nil {
			return "", errBadRequest(fmt.Sprintf("%s: a quoted key must be a JSON string, got %s", name, v))
		}
		return s, nil
	}
	return v, nil
}

// browseDocs handles GET /pools/default/buckets/{b}/scopes/{s}/collections/{c}/docs
// ?skip=&limit=&startkey=&endkey=&include_docs=: the collection's live
// documents in byte order of key, startkey and endkey included.
func (s *server) browseDocs(w http.ResponseWriter, r *http.Request) error {
	b, scope, coll, err := s.collectionPath(r)
	if err != nil {
		return err
	}
	c, err := b.Collection(scope, coll)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	skip, _, err := countParam(q, "skip")
	if err != nil {
		return err
	}
	limit, ok, err := intParam(q, "limit")
	if err == nil && ok && (limit < 1 || limit > browseMaxLimit) {
		err = errBadRequest(fmt.Sprintf("limit must be from 1 to %d", browseMaxLimit))
	}
	if err != nil {
		return err
	}
	if !ok {
		limit = browseDefaultLimit
	}
	start, err := browseKey(q, "startkey")
	if err != nil {
		return err
	}
	end, err := browseKey(q, "endkey")
	if err != nil {
		return err
	}
	withDocs, err := boolParam(q, "include_docs")
	if err != nil {
		return err
	}
	skipN := int(min(skip, int64(1)<<40))
	if s.coverage != nil {
		// A cluster node: each coverer lists its partitions' documents of
		// the range (their first skip+limit) and counts them; the node
		// asked merges them, as _all_docs does (alldocs_cluster.go).
		local := func(in []bool) ([]byte, error) {
			// Current documents, as for _all_docs (allDocsShare).
			if err := makeCurrent(r.Context(), b, partitionList(in), defaultConnectionTimeout*time.Millisecond); err != nil {
				return nil, err
			}
			docs, total, err := c.KeysIn(r.Context(), start, end, 0, skipN+int(limit), in)
			if err != nil {
				return nil, err
			}
			return browseShare(docs, total, withDocs)
		}
		if q.Has(shareRev) {
			in, _, err := s.shareAsked(r, b, s.copies)
			if err != nil {
				return err
			}
			out, err := local(in)
			if err != nil {
				return s.closedUnder(b, err)
			}
			w.Header().Set("Content-Type", "application/json")
			_, err = w.Write(out)
			return err
		}
		done, err := s.listingCluster(w, r, b, defaultConnectionTimeout*time.Millisecond, nil, local, func(shares []gjson.Result) {
			writeMergedBrowse(w, shares, skipN, int(limit))
		})
		if done || err != nil {
			return err
		}
	}
	docs, total, err := c.Keys(r.Context(), start, end, skipN, int(limit))
	if err != nil {
		return s.closedUnder(b, err)
	}
	rows := make([]browseRow, len(docs))
	for i, d := range docs {
		rows[i] = newBrowseRow(d, withDocs)
	}
	writeJSON(w, http.StatusOK, map[string]any{"total_rows": total, "rows": rows})
	return nil
}

// newBrowseRow is document d's row of a listing.
func newBrowseRow(d *engine.Document, withDoc bool) browseRow {
	row := browseRow{ID: d.Key, Rev: d.Rev(), CAS: d.CAS, Expiration: d.Expiration, Flags: d.Flags, Type: string(d.Type)}
	if withDoc {
		row.Doc = docEnvelope(d)
	}
	return row
}

// browseShare is a coverer's share of a listing: {"total_rows":N,
// "rows":[{"k":ID,"r":ROW}]}, the rows in key order.
func browseShare(docs []*engine.Document, total int, withDocs bool) ([]byte, error) {
	type keyed struct {
		K string    `json:"k"`
		R browseRow `json:"r"`
	}
	rows := make([]keyed, len(docs))
	for i, d := range docs {
		rows[i] = keyed{d.Key, newBrowseRow(d, withDocs)}
	}
	return json.Marshal(map[string]any{"total_rows": total, "rows": rows})
}

// writeMergedBrowse writes the listing the shares make: their rows in key
// order, skip passed over, at most limit; total_rows their sum.
func writeMergedBrowse(w http.ResponseWriter, shares []gjson.Result, skip, limit int) {
	total := int64(0)
	for _, sh := range shares {
		total += sh.Get("total_rows").Int()
	}
	all := keyedRows(shares, false)
	all = all[min(skip, len(all)):]
	all = all[:min(limit, len(all))]
	rows := make([]json.RawMessage, len(all))
	for i, kr := range all {
		rows[i] = json.RawMessage(kr.r)
	}
	writeJSON(w, http.StatusOK, map[string]any{"total_rows": total, "rows": rows})
}
