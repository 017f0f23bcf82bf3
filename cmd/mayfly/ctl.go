package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"

	"github.com/spf13/cobra"
)

// ctlParams are cbepctl's flush_param names the expiry pager endpoint takes.
var ctlParams = map[string]bool{
	"exp_pager_stime":            true,
	"exp_pager_initial_run_time": true,
}

// newCtlCmd is `mayfly ctl`, in cbepctl's shape:
//
//	mayfly ctl set flush_param exp_pager_stime N
//	mayfly ctl get flush_param exp_pager_stime
func newCtlCmd() *cobra.Command {
	var o clientOptions
	cmd := &cobra.Command{
		Use:   "ctl set|get flush_param NAME [VALUE]",
		Short: "Set or get a bucket's expiry pager parameters (cbepctl's flush_param)",
		Long: `Sets or gets a bucket's expiry pager parameters, in cbepctl's shape.

NAME: exp_pager_stime (seconds, 0 disables) or exp_pager_initial_run_time
(UTC hour, -1 for none). Setting one reschedules the next run at once.`,
		Example: `  mayfly ctl -u Administrator:password set flush_param exp_pager_stime 5
  mayfly ctl get flush_param exp_pager_stime -b travel`,
		Args: func(cmd *cobra.Command, a []string) error {
			if len(a) < 3 || a[1] != "flush_param" || (a[0] == "set" && len(a) != 4) || (a[0] == "get" && len(a) != 3) || (a[0] != "set" && a[0] != "get") {
				return usagef("takes set flush_param NAME VALUE or get flush_param NAME")
			}
			return nil
		},
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			switch len(args) {
			case 0:
				return []string{"set", "get"}, cobra.ShellCompDirectiveNoFileComp
			case 1:
				return []string{"flush_param"}, cobra.ShellCompDirectiveNoFileComp
			case 2:
				return []string{"exp_pager_stime", "exp_pager_initial_run_time"}, cobra.ShellCompDirectiveNoFileComp
			}
			return nil, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, a []string) error {
			param := a[2]
			if !ctlParams[param] {
				return fmt.Errorf("unknown flush_param %q (known: exp_pager_stime, exp_pager_initial_run_time)", param)
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			ctx, stdout := cmd.Context(), cmd.OutOrStdout()
			path := o.bucketPath() + "/settings/expiryPager"
			// The answer's values as their JSON text: a number decoded
			// into float64 would print 1000000 as 1e+06.
			var st map[string]json.RawMessage
			value := func() (string, error) {
				v, ok := st[param]
				if !ok {
					return "", fmt.Errorf("the server's answer has no %s", param)
				}
				return string(v), nil
			}
			if a[0] == "get" {
				if err := c.do(ctx, "GET", path, nil, &st); err != nil {
					return err
				}
				v, err := value()
				if err != nil {
					return err
				}
				fmt.Fprintf(stdout, "%s %s\n", param, v)
				return nil
			}
			if _, err := strconv.ParseInt(a[3], 10, 64); err != nil {
				return fmt.Errorf("%s must be an integer, got %q", param, a[3])
			}
			fmt.Fprintf(stdout, "setting param: %s %s\n", param, a[3])
			if err := c.do(ctx, "POST", path, url.Values{param: {a[3]}}, &st); err != nil {
				return err
			}
			v, err := value()
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "set %s to %s\n", param, v)
			return nil
		},
	}
	addClientFlags(cmd, &o, true)
	return cmd
}
