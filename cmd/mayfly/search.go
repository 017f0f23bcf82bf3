package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
)

const searchUsage = `usage: mayfly search [--host H] [-u USER:PASSWORD] [--size N] [--from N] [--consistent] INDEX 'QUERY STRING'

Runs a query_string query (bleve's query string syntax: words, +must, -not,
field:value, "phrases", ranges such as age:>30) on the full-text index INDEX
and prints the hits (document id and score, best first) and total_hits.
Flags may come before or after INDEX and QUERY STRING.`

// runSearch is `mayfly search`: a query_string query posted to
// /api/index/INDEX/query.
func runSearch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("search", flag.ContinueOnError)
	fs.SetOutput(stderr)
	host := fs.String("host", "127.0.0.1:8091", "server's HTTP address (http://... or https://...)")
	userPass := fs.String("u", "", "user:password (default $MAYFLY_USER and $MAYFLY_PASSWORD)")
	size := fs.Int("size", 10, "hits to print at most")
	from := fs.Int("from", 0, "hits to skip (for paging)")
	consistent := fs.Bool("consistent", false, "wait until the index has seen every write made before the query (ctl.consistency.level at_plus)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, searchUsage+"\n\nflags:")
		fs.PrintDefaults()
	}
	// The flag package stops at the first argument that is not a flag:
	// parse again after each one, so that flags may follow INDEX and QUERY.
	var pos []string
	for {
		if err := parseFlags(fs, args); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(pos) != 2 || pos[0] == "" {
		fs.Usage()
		return errUsage
	}
	if *size < 0 || *from < 0 {
		fmt.Fprintln(stderr, "--size and --from must not be negative")
		return errUsage
	}
	c, err := newAPIClient(*host, *userPass)
	if err != nil {
		return err
	}
	req := map[string]any{
		"query": map[string]any{"query": pos[1]},
		"size":  *size,
		"from":  *from,
	}
	if *consistent {
		req["ctl"] = map[string]any{"consistency": map[string]any{"level": "at_plus"}}
	}
	var res struct {
		Hits []struct {
			ID    string  `json:"id"`
			Score float64 `json:"score"`
		} `json:"hits"`
		TotalHits uint64  `json:"total_hits"`
		MaxScore  float64 `json:"max_score"`
		Took      int64   `json:"took"`
	}
	if err := c.postJSON(ctx, "/api/index/"+url.PathEscape(pos[0])+"/query", req, &res); err != nil {
		return err
	}
	if len(res.Hits) > 0 {
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tSCORE")
		for _, h := range res.Hits {
			fmt.Fprintf(tw, "%s\t%.4f\n", h.ID, h.Score)
		}
		tw.Flush()
	}
	shown := ""
	if n := len(res.Hits); uint64(n) < res.TotalHits {
		shown = fmt.Sprintf(" (%d shown from %d; use --size and --from for more)", n, *from+1)
		if n == 0 {
			shown = ""
		}
	}
	fmt.Fprintf(stdout, "total_hits: %d%s\n", res.TotalHits, shown)
	return nil
}

// postJSON posts in as JSON and decodes the answer into out. An error
// answer becomes an error with the server's reason: the search service's
// {"status":"fail","error":REASON} or the API's {"error":..,"reason":..}.
func (c *apiClient) postJSON(ctx context.Context, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.user != "" {
		req.SetBasicAuth(c.user, c.pass)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var e struct{ Status, Error, Reason string }
		if json.Unmarshal(data, &e) == nil {
			switch {
			case e.Reason != "" && resp.StatusCode == http.StatusUnauthorized && c.user == "":
				return fmt.Errorf("%s (%s): give -u user:password or set MAYFLY_USER and MAYFLY_PASSWORD", e.Reason, e.Error)
			case e.Reason != "":
				return fmt.Errorf("%s (%s)", e.Reason, e.Error)
			case e.Error != "":
				return fmt.Errorf("%s (%s)", e.Error, resp.Status)
			}
		}
		return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(data)))
	}
	return json.Unmarshal(data, out)
}
