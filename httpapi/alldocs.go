package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"

	"github.com/mayflydb/mayfly/changes"
)

// allDocsRow is one row of an _all_docs answer, in CouchDB's shape.
type allDocsRow struct {
	ID    string          `json:"id"`
	Key   string          `json:"key"`
	Value allDocsValue    `json:"value"`
	Doc   json.RawMessage `json:"doc,omitempty"`
}

// allDocsValue is a row's value: the document's revision.
type allDocsValue struct {
	Rev string `json:"rev"`
}

// allDocsRange reads the key range of an _all_docs query: startkey (or
// start_key) and endkey (or end_key), each a JSON string ("\"a\"", as
// CouchDB takes it) or the key as it is; key for one document.
func allDocsRange(q url.Values) (start, end string, hasStart, hasEnd bool, err error) {
	for _, p := range [][2]string{{"startkey", "start_key"}, {"endkey", "end_key"}, {"key", "key"}} {
		name := p[0]
		if !q.Has(name) {
			name = p[1]
		}
		if !q.Has(name) {
			continue
		}
		k, err := browseKey(q, name)
		if err != nil {
			return "", "", false, false, err
		}
		switch p[0] {
		case "startkey":
			start, hasStart = k, true
		case "endkey":
			end, hasEnd = k, true
		default:
			start, end, hasStart, hasEnd = k, k, true, true
		}
	}
	return start, end, hasStart, hasEnd, nil
}

// allDocs handles GET /{bucket}/_all_docs, CouchDB's listing of every live
// document of a collection (?collection=scope.collection, the default
// collection by default) in byte order of key:
//
//	{"total_rows":N,"offset":O,"rows":[{"id","key","value":{"rev"},"doc"?}]}
//
// Query: startkey/start_key, endkey/end_key (both included unless
// inclusive_end=false), key, descending (startkey is then the high end),
// skip, limit (none by default; 0 gives total_rows and offset alone) and
// include_docs. total_rows counts the collection's live documents and offset
// the rows before the first one given. Expired documents are left out, as
// every read leaves them out. A document's doc is its JSON object with _id
// and _rev set; a value that is not an object comes as {"_id","_rev","json"}
// and a binary one as {"_id","_rev","base64"}.
//
// It lists with engine.Collection.Keys: every document of the bucket is
// visited and the collection's sorted, whatever the range.
func (s *server) allDocs(w http.ResponseWriter, r *http.Request) error {
	b, err := s.bucketOf(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	c, err := collectionOf(b, q)
	if err != nil {
		return err
	}
	skip, _, err := countParam(q, "skip")
	if err != nil {
		return err
	}
	limit, hasLimit, err := countParam(q, "limit")
	if err != nil {
		return err
	}
	var descending, withDocs bool
	inclusiveEnd := true
	for name, p := range map[string]*bool{"descending": &descending, "include_docs": &withDocs, "inclusive_end": &inclusiveEnd} {
		if !q.Has(name) {
			continue
		}
		if *p, err = boolParam(q, name); err != nil {
			return err
		}
	}
	start, end, hasStart, hasEnd, err := allDocsRange(q)
	if err != nil {
		return err
	}
	all, _, err := c.Keys(r.Context(), "", "", 0, 0)
	if err != nil {
		return err
	}
	n := len(all)
	at := func(k string, after bool) int { // the first index past k (after) or at it
		return sort.Search(n, func(i int) bool {
			if after {
				return all[i].Key > k
			}
			return all[i].Key >= k
		})
	}
	// The rows are all[lo:hi], read upwards, or downwards when descending.
	lo, hi := 0, n
	if !descending {
		if hasStart {
			lo = at(start, false)
		}
		if hasEnd {
			hi = at(end, inclusiveEnd)
		}
	} else {
		if hasStart {
			hi = at(start, true)
		}
		if hasEnd {
			lo = at(end, !inclusiveEnd)
		}
	}
	hi = max(hi, lo)
	offset := lo
	if descending {
		offset = n - hi
	}
	offset += int(min(skip, int64(hi-lo)))
	count := hi - lo - int(min(skip, int64(hi-lo)))
	if hasLimit {
		count = int(min(int64(count), limit))
	}

	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, `{"total_rows":%d,"offset":%d,"rows":[`, n, offset)
	for i := range count {
		d := all[offset+i]
		if descending {
			d = all[n-1-offset-i]
		}
		row := allDocsRow{ID: d.Key, Key: d.Key, Value: allDocsValue{Rev: d.Rev()}}
		if withDocs {
			row.Doc = changes.AppendCouchDoc(nil, d)
		}
		line, err := json.Marshal(row)
		if err != nil { // cannot happen: every part is valid JSON
			line = []byte(`{"error":"internal_error"}`)
		}
		sep := ",\r\n"
		if i == 0 {
			sep = "\r\n"
		}
		if _, err := fmt.Fprintf(w, "%s%s", sep, line); err != nil {
			return nil // the client went away
		}
	}
	fmt.Fprint(w, "\r\n]}\n")
	return nil
}
