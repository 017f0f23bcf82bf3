package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
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
	docs, total, err := c.Keys(r.Context(), start, end, int(min(skip, int64(1)<<40)), int(limit))
	if err != nil {
		return s.closedUnder(b, err)
	}
	rows := make([]browseRow, len(docs))
	for i, d := range docs {
		rows[i] = browseRow{ID: d.Key, Rev: d.Rev(), CAS: d.CAS, Expiration: d.Expiration, Flags: d.Flags, Type: string(d.Type)}
		if withDocs {
			rows[i].Doc = docEnvelope(d)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"total_rows": total, "rows": rows})
	return nil
}
