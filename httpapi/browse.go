package httpapi

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/internal/jsonstr"
)

// Browsing a collection's documents in key order (Couchbase's document
// listing); see engine.Collection.Keys for its cost.
const (
	browseDefaultLimit = 100
	browseMaxLimit     = 10_000
)

// browseRow is one document of a listing, without its document: the
// document (include_docs) is appended as the bytes stored (appendBrowseRow).
type browseRow struct {
	ID         string `json:"id"`
	Rev        string `json:"rev"`
	CAS        uint64 `json:"cas"`
	Expiration int64  `json:"expiration"`
	Flags      uint32 `json:"flags"`
	Type       string `json:"type"`
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
	out := append(make([]byte, 0, 4096), `{"total_rows":`...)
	out = strconv.AppendInt(out, int64(total), 10)
	out = append(out, `,"rows":[`...)
	for i, d := range docs {
		if i > 0 {
			out = append(out, ',')
		}
		out = appendBrowseRow(out, d, withDocs)
	}
	writeRawJSON(w, append(out, "]}"...))
	return nil
}

// writeRawJSON writes out, a JSON object, as a 200 answer.
func writeRawJSON(w http.ResponseWriter, out []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(append(out, '\n'))
}

// appendBrowseRow appends document d's row of a listing. With withDoc,
// "doc" is {"json":VALUE,"meta":{...}}, VALUE the bytes stored (not
// re-encoded: a listing read to copy documents elsewhere, mayfly export,
// gets them as they are), or {"base64":...,"meta":{...}} for a binary
// value.
func appendBrowseRow(out []byte, d *engine.Document, withDoc bool) []byte {
	row, _ := json.Marshal(browseRow{ID: d.Key, Rev: d.Rev(), CAS: d.CAS, Expiration: d.Expiration, Flags: d.Flags, Type: string(d.Type)}) // plain fields: it always marshals
	if !withDoc {
		return append(out, row...)
	}
	out = append(out, row[:len(row)-1]...)
	out = append(out, `,"doc":{`...)
	if d.Type == engine.TypeJSON {
		out = append(out, `"json":`...)
		out = append(out, d.Value...)
	} else {
		// An empty value is "".
		out = append(out, `"base64":"`...)
		out = base64.StdEncoding.AppendEncode(out, d.Value)
		out = append(out, '"')
	}
	meta, _ := json.Marshal(docMeta{ID: d.Key, Rev: d.Rev(), CAS: d.CAS, Seq: d.Seq, Expiration: d.Expiration, Flags: d.Flags, Type: string(d.Type), TS: d.TS, Created: d.CreatedAt})
	out = append(out, `,"meta":`...)
	out = append(out, meta...)
	return append(out, "}}"...)
}

// browseShare is a coverer's share of a listing: {"total_rows":N,
// "rows":[{"k":ID,"r":ROW}]}, the rows in key order.
func browseShare(docs []*engine.Document, total int, withDocs bool) ([]byte, error) {
	out := append(make([]byte, 0, 4096), `{"total_rows":`...)
	out = strconv.AppendInt(out, int64(total), 10)
	out = append(out, `,"rows":[`...)
	for i, d := range docs {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, `{"k":`...)
		out = jsonstr.Append(out, d.Key)
		out = append(out, `,"r":`...)
		out = appendBrowseRow(out, d, withDocs)
		out = append(out, '}')
	}
	return append(out, "]}"...), nil
}

// writeMergedBrowse writes the listing the shares make: their rows in key
// order, skip passed over, at most limit; total_rows their sum. The rows
// are the coverers' bytes.
func writeMergedBrowse(w http.ResponseWriter, shares []gjson.Result, skip, limit int) {
	total := int64(0)
	for _, sh := range shares {
		total += sh.Get("total_rows").Int()
	}
	all := keyedRows(shares, false)
	all = all[min(skip, len(all)):]
	all = all[:min(limit, len(all))]
	out := append(make([]byte, 0, 4096), `{"total_rows":`...)
	out = strconv.AppendInt(out, total, 10)
	out = append(out, `,"rows":[`...)
	for i, kr := range all {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, kr.r...)
	}
	writeRawJSON(w, append(out, "]}"...))
}
