package main

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mayflydb/mayfly/internal/cbstats"
)

// newStatsCmd is `mayfly stats [NAME...|GROUP]`: the bucket's statistics
// under their cbstats names, one per line.
func newStatsCmd() *cobra.Command {
	var o clientOptions
	cmd := &cobra.Command{
		Use:   "stats [NAME...|warmup|memory]",
		Short: "Print a bucket's statistics (cbstats names)",
		Long: `Prints the bucket's statistics under their cbstats names; NAMEs pick some,
and a group name alone (warmup or memory) prints that group, as cbstats does.
The warm-up's state and thread are words (ep_warmup_state, ep_warmup_thread),
and its estimates are "unknown" until made, as cbstats warmup prints them.
A NAME the bucket lacks is reported after the others, and the exit status is
non-zero.`,
		Example: `  mayfly stats -u Administrator:password
  mayfly stats curr_items ep_warmup_state -b travel
  mayfly stats warmup`,
		RunE: func(cmd *cobra.Command, names []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			var nums map[string]int64
			if err := c.do(ctx, "GET", o.bucketPath()+"/stats", nil, &nums); err != nil {
				return err
			}
			st := make(map[string]string, len(nums))
			for n, v := range nums {
				st[n] = strconv.FormatInt(v, 10)
			}
			// The warmup group's words (ep_warmup_state, ...) come from
			// their own endpoint; a server without it has none. Where the
			// group and the numbers share a name, the group's value is the
			// one printed, as cbstats warmup gives it: an estimate not yet
			// made is "unknown", never the numbers' -1.
			warmup := map[string]string{}
			group := len(names) == 1 && (names[0] == "warmup" || names[0] == "memory")
			needWarmup := len(names) == 0 || (group && names[0] == "warmup")
			for _, n := range names {
				if _, ok := st[n]; !ok || strings.HasPrefix(n, "ep_warmup") {
					needWarmup = true
				}
			}
			if needWarmup {
				if err := c.do(ctx, "GET", o.bucketPath()+"/stats/warmup", nil, &warmup); err != nil {
					if group {
						return err
					}
					warmup = map[string]string{} // an older server: the numbers alone
				}
			}
			for n, v := range warmup {
				st[n] = v
			}
			switch {
			case group && names[0] == "warmup":
				names = nil
				for n := range warmup {
					names = append(names, n)
				}
				sort.Strings(names)
			case group:
				names = append([]string(nil), cbstats.Memory...)
			case len(names) == 0:
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
			var unknown []string
			for _, n := range names {
				v, ok := st[n]
				if !ok {
					unknown = append(unknown, strconv.Quote(n))
					continue
				}
				fmt.Fprintf(stdout, " %-*s %s\n", width+1, n+":", v)
			}
			switch len(unknown) {
			case 0:
				return nil
			case 1:
				return fmt.Errorf("no statistic named %s", unknown[0])
			}
			return fmt.Errorf("no statistics named %s", strings.Join(unknown, ", "))
		},
	}
	addClientFlags(cmd, &o, true)
	return cmd
}
