package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/mayflydb/mayfly/audit"
)

// errAuditBroken is runAudit's error for a log whose chain is broken (the
// break is already printed).
var errAuditBroken = errors.New("audit log broken")

const auditUsage = `usage: mayfly audit verify [--data DIR | FILE]

Checks the audit log's hash chain: every line must carry its line number
(seq) and the SHA-256 of the line before it (prev). Prints
"audit log whole: N records" and the hash of the last line (note it
elsewhere: the chain cannot show that lines were cut off the end), or the
line at which the chain breaks, and then exits 1.

The log read is FILE, or DIR/` + audit.FileName + ` (default ./data).`

// runAudit is `mayfly audit verify [--data DIR | FILE]`.
func runAudit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("audit", flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", "./data", "data directory whose "+audit.FileName+" to verify")
	fs.Usage = func() {
		fmt.Fprintln(stderr, auditUsage+"\n\nflags:")
		fs.PrintDefaults()
	}
	if len(args) == 0 || (args[0] != "verify" && args[0] != "-h" && args[0] != "--help" && args[0] != "-help") {
		fs.Usage()
		return errUsage
	}
	if args[0] == "verify" {
		args = args[1:]
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	path := filepath.Join(*data, audit.FileName)
	dataSet := false
	fs.Visit(func(f *flag.Flag) { dataSet = dataSet || f.Name == "data" })
	switch {
	case fs.NArg() > 1 || (fs.NArg() == 1 && dataSet):
		fmt.Fprintln(stderr, "mayfly audit verify: give --data DIR or FILE, not both")
		return errUsage
	case fs.NArg() == 1:
		path = fs.Arg(0)
	}
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
