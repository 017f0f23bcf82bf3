package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/mayflydb/mayfly/audit"
	"github.com/spf13/cobra"
)

// errAuditBroken is runAudit's error for a log whose chain is broken (the
// break is already printed).
var errAuditBroken = errors.New("audit log broken")

const auditLong = `Checks the audit log's hash chain: every line must carry its line number
(seq) and the SHA-256 of the line before it (prev). Prints
"audit log whole: N records" and the hash of the last line (note it
elsewhere: the chain cannot show that lines were cut off the end), or the
line at which the chain breaks, and then exits 1.

The log read is FILE, or DIR/` + audit.FileName + ` (default ./data).`

// newAuditCmd is `mayfly audit verify [--data DIR | FILE]`.
func newAuditCmd() *cobra.Command {
	var data string
	verify := &cobra.Command{
		Use:   "verify [--data DIR | FILE]",
		Short: "Verify the audit log's hash chain (exit 1 if broken)",
		Long:  auditLong,
		Args:  rangeArgs(0, 1, "at most one FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := filepath.Join(data, audit.FileName)
			if len(args) == 1 {
				if cmd.Flags().Changed("data") {
					return usagef("give --data DIR or FILE, not both")
				}
				path = args[0]
			}
			return runAuditVerify(cmd.OutOrStdout(), path)
		},
	}
	verify.Flags().StringVar(&data, "data", "./data", "data directory whose "+audit.FileName+" to verify")
	return groupCmd("audit verify [--data DIR | FILE]", "Verify the audit log's hash chain", "", verify)
}

// runAuditVerify checks the log at path and prints the outcome.
func runAuditVerify(stdout io.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	rep, err := audit.Verify(f)
	var ce *audit.ChainError
	if errors.As(err, &ce) {
		fmt.Fprintf(stdout, "audit log broken: %s: %v (%d records whole before it)\n", path, ce, rep.Records)
		return errAuditBroken
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "audit log whole: %d records\nhead %s\n", rep.Records, rep.Head)
	if len(rep.Torn) > 0 {
		fmt.Fprintf(stdout, "torn lines sealed by markers at lines %v\n", rep.Torn)
	}
	return nil
}
