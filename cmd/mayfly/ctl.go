package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
)

// ctlParamPath returns the bucket settings endpoint (below the bucket's
// path) that takes cbepctl's flush_param name, and whether its value is a
// fraction rather than an integer; ok is false for a name Mayfly lacks.
func ctlParamPath(name string) (path string, fraction, ok bool) {
	switch name {
	case "exp_pager_stime", "exp_pager_initial_run_time":
		return "/settings/expiryPager", false, true
	case "mem_high_wat", "mem_low_wat":
		return "/settings/waterMarks", false, true
	case "mem_high_wat_percent", "mem_low_wat_percent":
		return "/settings/waterMarks", true, true
	}
	return "", false, false
}

// ctlParamNames returns the flush_param names ctl takes.
func ctlParamNames() []string {
	return []string{"exp_pager_stime", "exp_pager_initial_run_time", "mem_high_wat", "mem_low_wat", "mem_high_wat_percent", "mem_low_wat_percent"}
}

// newCtlCmd is `mayfly ctl`, in cbepctl's shape:
//
//	mayfly ctl set flush_param exp_pager_stime N
//	mayfly ctl get flush_param exp_pager_stime
func newCtlCmd() *cobra.Command {
	var o clientOptions
	cmd := &cobra.Command{
		Use:   "ctl set|get flush_param NAME [VALUE]",
		Short: "Set or get a bucket's expiry pager and water mark parameters (cbepctl's flush_param)",
		Long: `Sets or gets a bucket's expiry pager and memory water mark parameters,
in cbepctl's shape. Settings persist with the bucket.

NAME: exp_pager_stime (seconds, 0 disables) or exp_pager_initial_run_time
(UTC hour, -1 for none): setting one reschedules the next run at once.
mem_high_wat, mem_low_wat (bytes, at most the quota, low below high; 0 for
the default, 85% and 75% of the quota) or mem_high_wat_percent,
mem_low_wat_percent (a fraction of the quota: 0.8 is 80%): eviction uses
them at once, and a change of ramQuota moves them in proportion.`,
		Example: `  mayfly ctl -u Administrator:password set flush_param exp_pager_stime 5
  mayfly ctl get flush_param exp_pager_stime -b travel
  mayfly ctl -u Administrator:password set flush_param mem_high_wat_percent 0.8`,
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
				return ctlParamNames(), cobra.ShellCompDirectiveNoFileComp
			}
			return nil, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, a []string) error {
			param := a[2]
			endpoint, fraction, ok := ctlParamPath(param)
			if !ok {
				return usagef("unknown flush_param %q (known: %s)", param, strings.Join(ctlParamNames(), ", "))
			}
			if a[0] == "set" {
				// Checked before any request: a mistake in the command
				// line (exit 2), not the server's refusal.
				if fraction {
					if _, err := strconv.ParseFloat(a[3], 64); err != nil {
						return usagef("%s must be a fraction of the quota (0.8 is 80%%), got %q", param, a[3])
					}
				} else if _, err := strconv.ParseInt(a[3], 10, 64); err != nil {
					return usagef("%s must be an integer, got %q", param, a[3])
				}
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			ctx, stdout := cmd.Context(), cmd.OutOrStdout()
			path := o.bucketPath() + endpoint
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
