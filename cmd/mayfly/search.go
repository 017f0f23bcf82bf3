package main

import (
	"fmt"
	"net/url"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

const searchLong = `Runs a query_string query (bleve's query string syntax: words, +must, -not,
field:value, "phrases", ranges such as age:>30) on the full-text index INDEX
and prints the hits (document id and score, best first) and total_hits.`

// newSearchCmd is `mayfly search INDEX QUERY`: a query_string query posted
// to /api/index/INDEX/query. Search indexes are named across buckets, so it
// takes no --bucket.
func newSearchCmd() *cobra.Command {
	var o clientOptions
	var size, from int
	var consistent bool
	cmd := &cobra.Command{
		Use:     "search INDEX 'QUERY STRING'",
		Short:   "Query a full-text index with a query string",
		Long:    searchLong,
		Example: "  mayfly search players 'chess +country:fr -retired:true' --size 20 --consistent",
		Args:    exactArgs(2, "INDEX and QUERY STRING"),
		RunE: func(cmd *cobra.Command, pos []string) error {
			if pos[0] == "" {
				return usagef("INDEX must not be empty")
			}
			if size < 0 || from < 0 {
				return usagef("--size and --from must not be negative")
			}
			return runSearch(cmd, &o, pos, size, from, consistent)
		},
	}
	addClientFlags(cmd, &o, false)
	cmd.Flags().IntVar(&size, "size", 10, "hits to print at most")
	cmd.Flags().IntVar(&from, "from", 0, "hits to skip (for paging)")
	cmd.Flags().BoolVar(&consistent, "consistent", false, "wait until the index has seen every write made before the query (ctl.consistency.level at_plus)")
	return cmd
}

func runSearch(cmd *cobra.Command, o *clientOptions, pos []string, size, from int, consistent bool) error {
	ctx, stdout := cmd.Context(), cmd.OutOrStdout()
	c, err := o.client()
	if err != nil {
		return err
	}
	req := map[string]any{
		"query": map[string]any{"query": pos[1]},
		"size":  size,
		"from":  from,
	}
	if consistent {
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
		shown = fmt.Sprintf(" (%d shown from %d; use --size and --from for more)", n, from+1)
		if n == 0 {
			shown = ""
		}
	}
	fmt.Fprintf(stdout, "total_hits: %d%s\n", res.TotalHits, shown)
	return nil
}
