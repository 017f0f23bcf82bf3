package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strconv"
)

// ctlParams maps cbepctl's flush_param names to the expiry pager endpoint.
var ctlParams = map[string]string{
	"exp_pager_stime":            "exp_pager_stime",
	"exp_pager_initial_run_time": "exp_pager_initial_run_time",
}

// runCtl is `mayfly ctl`, in cbepctl's shape:
//
//	mayfly ctl [--host H] [-u USER:PASSWORD] [-b BUCKET] set flush_param exp_pager_stime N
//	mayfly ctl [--host H] [-u USER:PASSWORD] [-b BUCKET] get flush_param exp_pager_stime
func runCtl(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, host, userPass, bucket := clientFlags("ctl", "usage: mayfly ctl [--host H] [-u USER:PASSWORD] [-b BUCKET] set flush_param NAME VALUE\n       mayfly ctl [--host H] [-u USER:PASSWORD] [-b BUCKET] get flush_param NAME\n\nNAME: exp_pager_stime (seconds, 0 disables) or exp_pager_initial_run_time (UTC hour, -1 for none).", stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	a := fs.Args()
	if len(a) < 3 || a[1] != "flush_param" || (a[0] == "set" && len(a) != 4) || (a[0] == "get" && len(a) != 3) || (a[0] != "set" && a[0] != "get") {
		fs.Usage()
		return errUsage
	}
	param, ok := ctlParams[a[2]]
	if !ok {
		return fmt.Errorf("unknown flush_param %q (known: exp_pager_stime, exp_pager_initial_run_time)", a[2])
	}
	c, err := newAPIClient(*host, *userPass)
	if err != nil {
		return err
	}
	path := "/pools/default/buckets/" + url.PathEscape(*bucket) + "/settings/expiryPager"
	var st map[string]any
	if a[0] == "get" {
		if err := c.do(ctx, "GET", path, nil, &st); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s %v\n", param, st[param])
		return nil
	}
	if _, err := strconv.ParseInt(a[3], 10, 64); err != nil {
		return fmt.Errorf("%s must be an integer, got %q", param, a[3])
	}
	fmt.Fprintf(stdout, "setting param: %s %s\n", param, a[3])
	if err := c.do(ctx, "POST", path, url.Values{param: {a[3]}}, &st); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "set %s to %v\n", param, st[param])
	return nil
}
