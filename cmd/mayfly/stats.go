package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"sort"
)

// runStats is `mayfly stats [--host H] [-u USER:PASSWORD] [-b BUCKET]`: the bucket's statistics
// under their cbstats names, one per line.
func runStats(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, host, userPass, bucket := clientFlags("stats", "usage: mayfly stats [--host H] [-u USER:PASSWORD] [-b BUCKET] [NAME...]\n\nPrints the bucket's statistics (cbstats names); NAMEs pick some.", stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	c, err := newAPIClient(*host, *userPass)
	if err != nil {
		return err
	}
	var st map[string]int64
	if err := c.do(ctx, "GET", "/pools/default/buckets/"+url.PathEscape(*bucket)+"/stats", nil, &st); err != nil {
		return err
	}
	names := fs.Args()
	if len(names) == 0 {
		for n := range st {
			names = append(names, n)
		}
		sort.Strings(names)
	}
	width := 0
	for _, n := range names {
		width = max(width, len(n))
	}
	for _, n := range names {
		v, ok := st[n]
		if !ok {
			return fmt.Errorf("no statistic named %q", n)
		}
		fmt.Fprintf(stdout, " %-*s %d\n", width+1, n+":", v)
	}
	return nil
}
