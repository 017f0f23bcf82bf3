// Command mayfly is Mayfly's server and command-line client.
//
//	mayfly serve [flags]      start the server
//	mayfly audit verify       check the audit log's hash chain
//	mayfly search INDEX QUERY query a full-text index
//	mayfly help               list the sub-commands
//
// Run "mayfly <command> --help" for a command's flags.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// command is one sub-command.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commands() map[string]command {
	return map[string]command{
		"serve":  {"start the server (HTTP API, memcached port) on a data directory", runServe},
		"ctl":    {"set or get a bucket's expiry pager parameters (cbepctl's flush_param)", runCtl},
		"stats":  {"print a bucket's statistics (cbstats names)", runStats},
		"search": {"query a full-text index with a query string (search INDEX 'QUERY')", runSearch},
		"audit":  {"verify the audit log's hash chain (audit verify [--data DIR | FILE])", runAudit},
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: mayfly <command> [flags]\n\ncommands:")
	cmds := commands()
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'mayfly <command> --help' for a command's flags.")
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches to a sub-command and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := commands()[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "mayfly: unknown command %q\n", args[0])
		usage(stderr)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := cmd.run(ctx, args[1:], stdout, stderr); err != nil {
		switch {
		case errors.Is(err, errHelp):
			return 0
		case errors.Is(err, errUsage):
			return 2
		case errors.Is(err, errAuditBroken):
			return 1 // the break is already printed
		}
		fmt.Fprintf(stderr, "mayfly %s: %v\n", args[0], err)
		return 1
	}
	return 0
}
