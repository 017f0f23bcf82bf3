package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
)

// queryOptions are `mayfly query`'s flags.
type queryOptions struct {
	clientOptions
	key, keys, startKey, endKey   string
	startDocID, endDocID          string
	inclusiveEnd, group, reduce   bool
	groupLevel, limit, skip       int
	descending, includeDocs, json bool
	stale, onError, progress      string
	expired                       string
}

// newQueryCmd is `mayfly query DDOC/VIEW`.
func newQueryCmd() *cobra.Command {
	var o queryOptions
	cmd := &cobra.Command{
		Use:   "query DDOC/VIEW",
		Short: "Query a view: a table of key, value and id, or the JSON answer",
		Long: `Queries a view and prints its rows as a table (key, value, id; the document
with --include-docs, null when it has expired) or, with --json, the server's
JSON answer as it comes.

Key flags take JSON (--key '["a",1]'); a value that is not JSON is taken
as a string (--key abc is --key '"abc"'). --stale=false waits for the index
to take in every write made before the query: on a terminal a progress bar
shows the index build meanwhile. Other stale values answer from the index as
it is, and a note on stderr says when it was still building.`,
		Example: `  mayfly query scores/by_player --group-level 1
  mayfly query scores/by_player --startkey '["ada"]' --endkey '["ada",{}]' --reduce=false --limit 10
  mayfly query scores/by_player --stale=false --json
  mayfly query sessions/by_user --reduce --expired exclude`,
		Args:              exactArgs(1, "DDOC/VIEW"),
		ValidArgsFunction: completeDDocs(&o.clientOptions, true),
		RunE: func(cmd *cobra.Command, args []string) error {
			ddoc, view, ok := strings.Cut(strings.TrimPrefix(args[0], "_design/"), "/")
			view = strings.TrimPrefix(view, "_view/")
			if !ok || ddoc == "" || view == "" || strings.Contains(view, "/") {
				return usagef("takes DDOC/VIEW, got %q", args[0])
			}
			switch o.progress {
			case "auto", "always", "never":
			default:
				return usagef("--progress must be auto, always or never, got %q", o.progress)
			}
			q, body, err := o.params(cmd)
			if err != nil {
				return err
			}
			return runQuery(cmd, &o, ddoc, view, q, body)
		},
	}
	addClientFlags(cmd, &o.clientOptions, true)
	fs := cmd.Flags()
	fs.StringVar(&o.key, "key", "", "only rows with this key (JSON)")
	fs.StringVar(&o.keys, "keys", "", "only rows with these keys (a JSON array)")
	fs.StringVar(&o.startKey, "startkey", "", "first key (JSON)")
	fs.StringVar(&o.endKey, "endkey", "", "last key (JSON)")
	fs.StringVar(&o.startDocID, "startkey-docid", "", "first document id among rows of the start key")
	fs.StringVar(&o.endDocID, "endkey-docid", "", "last document id among rows of the end key")
	fs.BoolVar(&o.inclusiveEnd, "inclusive-end", true, "include rows of the end key")
	fs.BoolVar(&o.group, "group", false, "reduce per distinct key")
	fs.IntVar(&o.groupLevel, "group-level", 0, "reduce per the first N items of array keys")
	fs.BoolVar(&o.reduce, "reduce", true, "use the view's reduce function (--reduce=false for the mapped rows)")
	fs.IntVar(&o.limit, "limit", 0, "rows at most")
	fs.IntVar(&o.skip, "skip", 0, "rows to skip")
	fs.BoolVar(&o.descending, "descending", false, "keys in descending order")
	fs.StringVar(&o.stale, "stale", "", "ok (the index as it is), update_after (the default) or false (wait for the index)")
	fs.BoolVar(&o.includeDocs, "include-docs", false, "each row's document (null when it has expired)")
	fs.StringVar(&o.onError, "on-error", "", "continue or stop")
	fs.StringVar(&o.expired, "expired", "", "include (Couchbase's rule: rows of expired documents stay until purged) or exclude (exact: only live documents' rows and reductions)")
	fs.BoolVar(&o.json, "json", false, "print the JSON answer instead of a table")
	fs.StringVar(&o.progress, "progress", "auto", "progress bar on stderr while --stale=false waits: auto (when it is a terminal), always or never")
	_ = cmd.RegisterFlagCompletionFunc("stale", cobra.FixedCompletions([]string{"false", "ok", "update_after"}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("expired", cobra.FixedCompletions([]string{"include", "exclude"}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("on-error", cobra.FixedCompletions([]string{"continue", "stop"}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("progress", cobra.FixedCompletions([]string{"auto", "always", "never"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// jsonArg is v if it is JSON, else v as a JSON string.
func jsonArg(v string) string {
	if json.Valid([]byte(v)) {
		return v
	}
	s, _ := json.Marshal(v)
	return string(s)
}

// params turns the flags given into the view's query parameters, and the
// POST body carrying --keys (which may be long).
func (o *queryOptions) params(cmd *cobra.Command) (url.Values, []byte, error) {
	fs := cmd.Flags()
	q := url.Values{}
	for _, p := range []struct {
		flag, param, val string
	}{
		{"key", "key", o.key},
		{"startkey", "startkey", o.startKey},
		{"endkey", "endkey", o.endKey},
	} {
		if fs.Changed(p.flag) {
			q.Set(p.param, jsonArg(p.val))
		}
	}
	for _, p := range []struct {
		flag, param, val string
	}{
		{"startkey-docid", "startkey_docid", o.startDocID},
		{"endkey-docid", "endkey_docid", o.endDocID},
		{"stale", "stale", o.stale},
		{"on-error", "on_error", o.onError},
		{"expired", "expired", o.expired},
		{"inclusive-end", "inclusive_end", strconv.FormatBool(o.inclusiveEnd)},
		{"group", "group", strconv.FormatBool(o.group)},
		{"reduce", "reduce", strconv.FormatBool(o.reduce)},
		{"descending", "descending", strconv.FormatBool(o.descending)},
		{"include-docs", "include_docs", strconv.FormatBool(o.includeDocs)},
	} {
		if fs.Changed(p.flag) {
			q.Set(p.param, p.val)
		}
	}
	for _, p := range []struct {
		flag, param string
		val         int
	}{
		{"group-level", "group_level", o.groupLevel},
		{"limit", "limit", o.limit},
		{"skip", "skip", o.skip},
	} {
		if fs.Changed(p.flag) {
			if p.val < 0 {
				return nil, nil, usagef("--%s must not be negative", p.flag)
			}
			q.Set(p.param, strconv.Itoa(p.val))
		}
	}
	var body []byte
	if fs.Changed("keys") {
		var keys []json.RawMessage
		if err := json.Unmarshal([]byte(o.keys), &keys); err != nil {
			return nil, nil, usagef("--keys must be a JSON array, got %s", o.keys)
		}
		body, _ = json.Marshal(map[string]any{"keys": keys})
	}
	return q, body, nil
}

// viewRow is one row of a view's answer.
type viewRow struct {
	ID    *string         `json:"id"`
	Key   json.RawMessage `json:"key"`
	Value json.RawMessage `json:"value"`
	Doc   json.RawMessage `json:"doc"`
}

func runQuery(cmd *cobra.Command, o *queryOptions, ddoc, view string, q url.Values, body []byte) error {
	c, err := o.client()
	if err != nil {
		return err
	}
	ctx, stdout, stderr := cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr()
	base := "/" + url.PathEscape(o.bucket) + "/_design/" + url.PathEscape(ddoc)
	path := base + "/_view/" + url.PathEscape(view)
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	method, rbody := http.MethodGet, io.Reader(nil)
	if body != nil {
		method, rbody = http.MethodPost, bytes.NewReader(body)
	}
	req, err := c.newRequest(ctx, method, path, rbody)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	// While a stale=false query waits for its index, a bar shows the build.
	var watch *buildWatch
	if strings.EqualFold(o.stale, "false") && (o.progress == "always" || (o.progress == "auto" && isTerminal(stderr))) {
		watch = watchBuild(ctx, c, base, ddoc, stderr)
	}
	resp, err := c.send(req)
	if watch != nil {
		watch.stop()
	}
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.Header.Get("X-Mayfly-Index-Building") == "true" {
		fmt.Fprintf(stderr, "note: the index of %s is still building (%s changes to index): the answer may be partial; --stale=false waits for it\n",
			ddoc, resp.Header.Get("X-Mayfly-Index-Pending"))
	}
	if o.json {
		if _, err := io.Copy(stdout, resp.Body); err != nil {
			return fmt.Errorf("reading the answer: %s", netReason(err))
		}
		return nil
	}
	var ans struct {
		TotalRows *int      `json:"total_rows"`
		Rows      []viewRow `json:"rows"`
		Errors    []struct {
			From   string `json:"from"`
			Reason string `json:"reason"`
		} `json:"errors"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil {
		return fmt.Errorf("the view's answer is not the JSON expected: %s", jsonReason(err))
	}
	printRows(stdout, ans.Rows, o.includeDocs)
	summary := fmt.Sprintf("%d rows", len(ans.Rows))
	if ans.TotalRows != nil {
		summary += fmt.Sprintf(" (total_rows %d)", *ans.TotalRows)
	}
	fmt.Fprintln(stdout, summary)
	if len(ans.Errors) > 0 {
		for _, e := range ans.Errors {
			fmt.Fprintf(stderr, "error from %s: %s\n", e.From, e.Reason)
		}
		return fmt.Errorf("the answer was cut short by %d error(s)", len(ans.Errors))
	}
	return nil
}

// printRows prints rows as a table: KEY, VALUE, then ID when rows have one
// and DOC with --include-docs.
func printRows(w io.Writer, rows []viewRow, docs bool) {
	if len(rows) == 0 {
		return
	}
	withID := false
	for _, r := range rows {
		withID = withID || r.ID != nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := "KEY\tVALUE"
	if withID {
		head += "\tID"
	}
	if docs && withID {
		head += "\tDOC"
	}
	fmt.Fprintln(tw, head)
	for _, r := range rows {
		line := compactJSON(r.Key) + "\t" + compactJSON(r.Value)
		if withID {
			id := ""
			if r.ID != nil {
				id = *r.ID
			}
			line += "\t" + id
		}
		if docs && withID {
			line += "\t" + compactJSON(r.Doc)
		}
		fmt.Fprintln(tw, line)
	}
	tw.Flush()
}

// compactJSON is raw on one line; "null" when absent.
func compactJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "null"
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// buildInfo is the part of _info a progress bar shows.
type buildInfo struct {
	Building bool    `json:"building"`
	Indexed  uint64  `json:"docs_indexed"`
	ToIndex  uint64  `json:"docs_to_index"`
	Rate     float64 `json:"rate"`
	ETA      float64 `json:"eta_seconds"`
}

// buildWatch polls a design document's _info while a query waits, drawing
// a bar while the index builds.
type buildWatch struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// buildPoll is how often the watch asks _info.
const buildPoll = 250 * time.Millisecond

func watchBuild(ctx context.Context, c *apiClient, base, ddoc string, w io.Writer) *buildWatch {
	ctx, cancel := context.WithCancel(ctx)
	bw := &buildWatch{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(bw.done)
		var bar *progressbar.ProgressBar
		defer func() {
			if bar != nil {
				_ = bar.Clear()
			}
		}()
		tick := time.NewTicker(buildPoll)
		defer tick.Stop()
		for {
			var inf buildInfo
			if err := c.call(ctx, http.MethodGet, base+"/_info", "", nil, &inf); err == nil && (inf.Building || inf.ToIndex > 0) {
				total := max(int64(inf.Indexed+inf.ToIndex), 1)
				desc := fmt.Sprintf("indexing %s: %.0f changes/s", ddoc, inf.Rate)
				if inf.ETA > 0 {
					desc += fmt.Sprintf(", about %s left", (time.Duration(inf.ETA * float64(time.Second))).Round(time.Second))
				}
				if bar == nil {
					// Polls are buildPoll apart: every one is drawn.
					bar = newBar(w, total, desc, false, false, 0)
				}
				bar.ChangeMax64(total)
				bar.Describe(desc)
				_ = bar.Set64(int64(inf.Indexed))
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return bw
}

// stop ends the watch and clears its bar.
func (bw *buildWatch) stop() {
	bw.cancel()
	<-bw.done
}
