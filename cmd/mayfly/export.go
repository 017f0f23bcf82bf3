package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mayflydb/mayfly/internal/jsonstr"
)

// exportOptions are `mayfly export`'s flags.
type exportOptions struct {
	docOptions
	page int
}

// newExportCmd is `mayfly export FILE|-`.
func newExportCmd() *cobra.Command {
	var o exportOptions
	cmd := &cobra.Command{
		Use:   "export FILE|-",
		Short: "Write a bucket's documents as _bulk lines (NDJSON), for mayfly load",
		Long: `Writes the bucket's documents (every collection, or --collection's) to FILE, or
standard output with "-", one line each that POST /BUCKET/_bulk and
mayfly load take as they are:

  {"op":"upsert","id":ID,"doc":VALUE,"collection":"S.C","flags":N,"expiry":E}

expiry is the document's expiration as an absolute Unix time (left out when
it has none); a binary value comes as "base64":"..." instead of "doc".
Documents whose expiration has passed are not exported (not even those the
pager has not purged yet). CAS values, revisions and sequence numbers are
not: the server that loads the documents gives them its own.

The documents are read page by page through the collection listing
(GET /pools/default/buckets/B/scopes/S/collections/C/docs?include_docs=true),
so memory stays bounded whatever the bucket's size. A document written while
the export runs may or may not be in it.

A summary follows: the documents exported, how many of them binary, the
collections; on standard error when the lines go to standard output.`,
		Example: `  mayfly export travel.ndjson -b travel
  mayfly export - -b travel --host http://old:8091 | mayfly load - -b travel --host http://new:8091
  mayfly export people.ndjson --collection app.people`,
		Args: exactArgs(1, "FILE (or - for standard output)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.page < 1 || o.page > maxExportPage {
				return usagef("--page must be from 1 to %d", maxExportPage)
			}
			if err := checkCollectionFlag(o.collection); err != nil {
				return err
			}
			return runExport(cmd, &o, args[0])
		},
	}
	addDocFlags(cmd, &o.docOptions)
	cmd.Flags().Lookup("collection").Usage = "scope.collection to export (default: every collection of the bucket)"
	cmd.Flags().IntVar(&o.page, "page", 1000, "documents a request asks for (fewer when the documents are large)")
	return cmd
}

// maxExportPage is the most documents one listing request may ask for (the
// listing's own limit).
const maxExportPage = 10_000

// exportPageBytes is the size a page of documents aims at: after a page
// whose documents average more than exportPageBytes/page, the next asks for
// fewer, so that memory stays near this however large the documents.
const exportPageBytes = 8 << 20

// exportFirstPage is the most documents the first page of documents asks
// for, before their sizes are known.
const exportFirstPage = 16

// exportTally is what an export wrote.
type exportTally struct {
	docs, binary int64
	collections  []string
}

func runExport(cmd *cobra.Command, o *exportOptions, name string) (err error) {
	c, err := o.client()
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	var out io.Writer = cmd.OutOrStdout()
	if name != "-" {
		f, err := os.Create(name)
		if err != nil {
			return err
		}
		defer func() {
			if cerr := f.Close(); err == nil && cerr != nil {
				err = cerr
			}
		}()
		out = f
	}
	colls := []string{o.collection}
	if o.collection == "" {
		if colls, err = exportCollections(ctx, c, &o.clientOptions); err != nil {
			return err
		}
	}
	start := time.Now() // wall clock: export rate
	bw := bufio.NewWriterSize(out, 256<<10)
	var t exportTally
	for _, coll := range colls {
		if err := exportCollection(ctx, c, o, coll, bw, &t); err != nil {
			bw.Flush()
			return fmt.Errorf("export stopped in %s after %d documents: %w", coll, t.docs, err)
		}
		t.collections = append(t.collections, coll)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	took := time.Since(start) // wall clock: export rate
	summary := cmd.OutOrStdout()
	if name == "-" {
		summary = cmd.ErrOrStderr() // standard output holds the lines
	}
	fmt.Fprintf(summary, "exported %d documents (%d binary) from %s in %s (%s docs/s); collections: %s\n",
		t.docs, t.binary, o.bucket, took.Round(time.Millisecond), humanRate(t.docs, took), strings.Join(t.collections, ", "))
	return nil
}

// exportCollections is every collection of the bucket, as scope.collection,
// in the order the server lists them.
func exportCollections(ctx context.Context, c *apiClient, o *clientOptions) ([]string, error) {
	var list struct {
		Scopes []struct {
			Name        string `json:"name"`
			Collections []struct {
				Name string `json:"name"`
			} `json:"collections"`
		} `json:"scopes"`
	}
	if err := c.call(ctx, http.MethodGet, o.bucketPath()+"/scopes", "", nil, &list); err != nil {
		return nil, fmt.Errorf("listing the bucket's collections: %w", err)
	}
	var out []string
	for _, s := range list.Scopes {
		for _, coll := range s.Collections {
			out = append(out, s.Name+"."+coll.Name)
		}
	}
	if len(out) == 0 {
		out = []string{"_default._default"} // a server that lists no collections has that one
	}
	return out, nil
}

// exportRow is a row of the collection listing with include_docs.
type exportRow struct {
	ID         string `json:"id"`
	Expiration int64  `json:"expiration"`
	Flags      uint32 `json:"flags"`
	Doc        *struct {
		JSON   json.RawMessage `json:"json"`
		Base64 *string         `json:"base64"`
	} `json:"doc"`
}

// exportCollection writes the lines of one collection's documents to w,
// a page at a time: the keys of a page from _all_docs (which reads only
// the keys it returns), then the documents of that key range from the
// collection listing (whose total_rows counts its whole range: asked for
// the rest of the collection page after page, it would read the rest of
// the collection each time).
func exportCollection(ctx context.Context, c *apiClient, o *exportOptions, coll string, w *bufio.Writer, t *exportTally) error {
	scope, name, _ := strings.Cut(coll, ".")
	listing := o.bucketPath() + "/scopes/" + url.PathEscape(scope) + "/collections/" + url.PathEscape(name) + "/docs"
	collJSON := jsonstr.Append(nil, coll)
	// The documents' pages start small and grow to --page, or as far as
	// exportPageBytes allows once the documents' sizes are known.
	limit := min(o.page, exportFirstPage)
	from := "" // the first key not yet exported (a key's successor: key+"\x00")
	var line []byte
	for {
		keys, err := exportKeys(ctx, c, o, coll, from)
		if err != nil {
			return err
		}
		if len(keys) == 0 {
			return nil
		}
		last := keys[len(keys)-1]
		// The documents from `from` to last: the keys just listed, and any
		// written there since.
		for {
			q := url.Values{"include_docs": {"true"}, "limit": {strconv.Itoa(limit)}, "endkey": {string(jsonstr.Append(nil, last))}}
			if from != "" {
				q.Set("startkey", string(jsonstr.Append(nil, from)))
			}
			var data []byte
			if err := c.call(ctx, http.MethodGet, listing+"?"+q.Encode(), "", nil, &data); err != nil {
				return err
			}
			var page struct {
				Rows []exportRow `json:"rows"`
			}
			if err := json.Unmarshal(data, &page); err != nil {
				return fmt.Errorf("the server's listing is not the JSON expected: %s", strings.TrimPrefix(err.Error(), "json: "))
			}
			for i := range page.Rows {
				r := &page.Rows[i]
				if line, err = appendExportLine(line[:0], r, collJSON); err != nil {
					return err
				}
				if _, err := w.Write(line); err != nil {
					return fmt.Errorf("writing: %w", err)
				}
				t.docs++
				if r.Doc.Base64 != nil {
					t.binary++
				}
			}
			asked := limit
			if n := len(page.Rows); n > 0 {
				from = page.Rows[n-1].ID + "\x00"
				limit = max(1, min(o.page, exportPageBytes/max(1, len(data)/n)))
			}
			if len(page.Rows) < asked {
				break
			}
		}
		from = last + "\x00"
		if len(keys) < o.page {
			return nil
		}
	}
}

// exportKeys is the next page of the collection's keys from key from on
// (all of them from the start when from is ""), through _all_docs without
// the documents.
func exportKeys(ctx context.Context, c *apiClient, o *exportOptions, coll, from string) ([]string, error) {
	q := url.Values{"collection": {coll}, "limit": {strconv.Itoa(o.page)}}
	if from != "" {
		q.Set("startkey", string(jsonstr.Append(nil, from)))
	}
	var page struct {
		Rows []struct {
			ID string `json:"id"`
		} `json:"rows"`
	}
	if err := c.call(ctx, http.MethodGet, "/"+url.PathEscape(o.bucket)+"/_all_docs?"+q.Encode(), "", nil, &page); err != nil {
		return nil, err
	}
	keys := make([]string, len(page.Rows))
	for i, r := range page.Rows {
		keys[i] = r.ID
	}
	return keys, nil
}

// appendExportLine appends the _bulk line of row r of collection coll (a
// JSON string) to out.
func appendExportLine(out []byte, r *exportRow, coll []byte) ([]byte, error) {
	if r.Doc == nil || (r.Doc.JSON == nil && r.Doc.Base64 == nil) {
		return nil, fmt.Errorf("the server's listing has no document for %q: an older server without include_docs?", r.ID)
	}
	out = append(out, `{"op":"upsert","id":`...)
	out = jsonstr.Append(out, r.ID)
	if r.Doc.Base64 != nil {
		out = append(out, `,"base64":`...)
		out = jsonstr.Append(out, *r.Doc.Base64)
	} else {
		out = append(out, `,"doc":`...)
		if bytes.ContainsAny(r.Doc.JSON, "\r\n") {
			// Only a value's insignificant spaces can hold a line end
			// (JSON escapes those in strings): without them it fits on
			// its line, the same JSON.
			var buf bytes.Buffer
			if err := json.Compact(&buf, r.Doc.JSON); err != nil {
				return nil, fmt.Errorf("the value of %q is not JSON: %w", r.ID, err)
			}
			out = append(out, buf.Bytes()...)
		} else {
			out = append(out, r.Doc.JSON...)
		}
	}
	out = append(out, `,"collection":`...)
	out = append(out, coll...)
	out = append(out, `,"flags":`...)
	out = strconv.AppendUint(out, uint64(r.Flags), 10)
	if r.Expiration != 0 {
		out = append(out, `,"expiry":`...)
		out = strconv.AppendInt(out, r.Expiration, 10)
	}
	return append(out, "}\n"...), nil
}

// checkCollectionFlag checks a --collection value's shape, scope.collection
// ("" for none): a usage error (exit 2) otherwise, before any work.
func checkCollectionFlag(coll string) error {
	if coll == "" {
		return nil
	}
	if s, c, ok := strings.Cut(coll, "."); !ok || s == "" || c == "" || strings.Contains(c, ".") {
		return usagef("--collection must be scope.collection, got %q", coll)
	}
	return nil
}
