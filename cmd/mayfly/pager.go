package main

import (
	"fmt"
	"net/http"
	"time"

	"github.com/spf13/cobra"
)

// newPagerCmd is `mayfly pager run`.
func newPagerCmd() *cobra.Command {
	var o clientOptions
	run := &cobra.Command{
		Use:   "run",
		Short: "Run the bucket's expiry pager now and print what it purged",
		Long: `Runs the bucket's expiry pager at once (it also runs every exp_pager_stime
seconds; see mayfly ctl) and prints the expired documents it purged.`,
		Example: "  mayfly pager run -b travel",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			var res struct {
				Purged     int   `json:"purged"`
				Batches    int   `json:"batches"`
				DurationMS int64 `json:"duration_ms"`
			}
			if err := c.call(cmd.Context(), http.MethodPost, o.bucketPath()+"/controller/runExpiryPager", "", nil, &res); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "purged %d expired documents from %s in %s\n", res.Purged, o.bucket, time.Duration(res.DurationMS)*time.Millisecond)
			return nil
		},
	}
	addClientFlags(run, &o, true)
	return groupCmd("pager run", "Run a bucket's expiry pager now", "", run)
}
