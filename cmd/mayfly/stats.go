package main

import (
	"fmt"
	"sort"

	"github.com/spf13/cobra"
)

// newStatsCmd is `mayfly stats [NAME...]`: the bucket's statistics under
// their cbstats names, one per line.
func newStatsCmd() *cobra.Command {
	var o clientOptions
	cmd := &cobra.Command{
		Use:   "stats [NAME...]",
		Short: "Print a bucket's statistics (cbstats names)",
		Long:  "Prints the bucket's statistics under their cbstats names; NAMEs pick some.",
		Example: `  mayfly stats -u Administrator:password
  mayfly stats curr_items -b travel`,
		RunE: func(cmd *cobra.Command, names []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			var st map[string]int64
			if err := c.do(cmd.Context(), "GET", o.bucketPath()+"/stats", nil, &st); err != nil {
				return err
			}
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
			stdout := cmd.OutOrStdout()
			for _, n := range names {
				v, ok := st[n]
				if !ok {
					return fmt.Errorf("no statistic named %q", n)
				}
				fmt.Fprintf(stdout, " %-*s %d\n", width+1, n+":", v)
			}
			return nil
		},
	}
	addClientFlags(cmd, &o, true)
	return cmd
}
