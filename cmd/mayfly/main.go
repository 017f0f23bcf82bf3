// Command mayfly is Mayfly's server and command-line client.
//
//	mayfly serve [flags]              start the server
//	mayfly load FILE|-                bulk-load NDJSON, a JSON array or CSV
//	mayfly get|put|rm|touch KEY       one document
//	mayfly query DDOC/VIEW            query a view
//	mayfly ddoc put|get|rm|ls         design documents
//	mayfly pager run                  run the expiry pager now
//	mayfly ctl, stats, search         pager parameters, statistics, full-text queries
//	mayfly audit verify               check the audit log's hash chain
//	mayfly version                    version, Go version, commit
//	mayfly completion bash|zsh|fish   shell completion script
//
// Run "mayfly <command> --help" for a command's flags. Flags may come before
// or after the positional arguments.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// errUsage reports bad flags or arguments, already explained to the user;
// errHelp a request for help, already answered.
var (
	errUsage = errors.New("usage")
	errHelp  = errors.New("help")
)

// usageError is a mistake in the command line: exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func (e *usageError) Is(target error) bool { return target == errUsage }

// usagef is a usageError with a formatted message.
func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

// exactArgs, rangeArgs and noArgs check the positional arguments, failing
// with a usage error (exit code 2).
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("takes %s, got %d argument(s)", what, len(args))
		}
		return nil
	}
}

func rangeArgs(lo, hi int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < lo || len(args) > hi {
			return usagef("takes %s, got %d argument(s)", what, len(args))
		}
		return nil
	}
}

func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("unexpected argument %q", args[0])
	}
	return nil
}

// needSubcommand is the RunE of a command that only groups others: without
// one (or with an unknown one) it is a usage error.
func needSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		cmd.SetOut(cmd.ErrOrStderr())
		_ = cmd.Usage()
		return &usageError{"needs a sub-command"}
	}
	return usagef("unknown sub-command %q", args[0])
}

// groupCmd is a command that only groups subs: run alone (or with an
// unknown sub-command) it is a usage error.
func groupCmd(use, short, long string, subs ...*cobra.Command) *cobra.Command {
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long:  long,
		Args:  cobra.ArbitraryArgs,
		RunE:  needSubcommand,
	}
	cmd.AddCommand(subs...)
	return cmd
}

// newRootCmd builds the whole command tree. It holds no state between runs:
// each run builds its own.
func newRootCmd(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "mayfly",
		Short: "Mayfly: a document database with expiry-aware map/reduce views",
		Long: `Mayfly is a document database in the Couchbase mould: one binary is both the
server (mayfly serve) and the client of its HTTP API.

Client commands take --host (default $MAYFLY_HOST or http://127.0.0.1:8091),
-b/--bucket (default "default"), and credentials: -u USER -p PASSWORD,
-u USER:PASSWORD, or $MAYFLY_USER and $MAYFLY_PASSWORD. Flags may come
before or after the positional arguments. Errors exit 1, usage errors 2.`,
		Version:       versionText(),
		SilenceErrors: true,
		SilenceUsage:  true,
		RunE: func(cmd *cobra.Command, args []string) error {
			cmd.SetOut(cmd.ErrOrStderr())
			_ = cmd.Usage()
			return &usageError{"needs a command"}
		},
	}
	root.SetVersionTemplate("{{.Version}}")
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error { return &usageError{cleanFlagError(err.Error())} })
	root.AddGroup(
		&cobra.Group{ID: "server", Title: "Server:"},
		&cobra.Group{ID: "docs", Title: "Documents:"},
		&cobra.Group{ID: "views", Title: "Views and search:"},
		&cobra.Group{ID: "admin", Title: "Buckets and statistics:"},
	)
	for group, cmds := range map[string][]*cobra.Command{
		"server": {newServeCmd(), newClusterCmd(), newAuditCmd(), newVersionCmd()},
		"docs":   {newLoadCmd(), newExportCmd(), newGetCmd(), newPutCmd(), newRmCmd(), newTouchCmd()},
		"views":  {newQueryCmd(), newDDocCmd(), newSearchCmd()},
		"admin":  {newStatsCmd(), newPagerCmd(), newCtlCmd()},
	} {
		for _, c := range cmds {
			c.GroupID = group
			root.AddCommand(c)
		}
	}
	// cobra's completion command only groups its shells: without one, or
	// with one it does not know, it is a usage error (exit 2, nothing on
	// stdout, which `source <(mayfly completion SHELL)` would read).
	root.InitDefaultCompletionCmd()
	if comp, _, err := root.Find([]string{"completion"}); err == nil && comp != root {
		comp.Args = cobra.ArbitraryArgs
		comp.RunE = func(cmd *cobra.Command, args []string) error {
			cmd.SetOut(cmd.ErrOrStderr())
			_ = cmd.Usage()
			if len(args) == 0 {
				return usagef("needs a shell: bash, zsh, fish or powershell")
			}
			return usagef("unknown shell %q (known: bash, zsh, fish, powershell)", args[0])
		}
	}
	return root
}

func main() {
	os.Exit(runWith(os.Stdin, os.Args[1:], os.Stdout, os.Stderr))
}

// run runs one command line with no standard input and returns the exit
// code.
func run(args []string, stdout, stderr io.Writer) int {
	return runWith(strings.NewReader(""), args, stdout, stderr)
}

// runWith runs one command line and returns the exit code: 0, 1 for an
// error (the server's reason is printed), 2 for a usage error.
func runWith(stdin io.Reader, args []string, stdout, stderr io.Writer) int {
	root := newRootCmd(stdin, stdout, stderr)
	root.SetArgs(normalizeArgs(root, args))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	name := "mayfly"
	if cmd != nil {
		name = cmd.CommandPath()
	}
	switch {
	case errors.Is(err, errHelp):
		return 0
	case errors.Is(err, errAuditBroken), errors.Is(err, errReported):
		return 1 // already explained
	case errors.Is(err, errUsage):
		var ue *usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(stderr, "%s: %s\n", name, ue.msg)
		}
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", name)
		return 2
	case strings.HasPrefix(err.Error(), "unknown command "):
		// cobra's own: a sub-command that does not exist.
		fmt.Fprintf(stderr, "mayfly: %v\nRun 'mayfly --help' for the list of commands.\n", err)
		return 2
	}
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	return 1
}

// goParseError matches what strconv and time add to a flag's error.
var goParseError = regexp.MustCompile(`(strconv\.\w+: parsing "[^"]*": |time: )`)

// cleanFlagError is the flag parser's message without the Go functions
// it names (invalid argument "x" for "--limit" flag: invalid syntax).
func cleanFlagError(msg string) string {
	return goParseError.ReplaceAllString(msg, "")
}

// normalizeArgs adapts a command line to the flag parser:
//
//   - -name becomes --name for every long flag of the command: the Go flag
//     package, which earlier releases of mayfly used, took both spellings,
//     so scripts written for it keep working (one-letter shorthands such as
//     -b, -u, -p are left alone);
//   - a negative number given as an argument (mayfly ctl set flush_param
//     exp_pager_initial_run_time -1) is not a flag: the arguments are moved
//     after "--", in their order, with the flags before.
func normalizeArgs(root *cobra.Command, args []string) []string {
	cmd, _, err := root.Find(args)
	if err != nil || cmd == nil {
		return args
	}
	flags := pflag.NewFlagSet(cmd.Name(), pflag.ContinueOnError)
	flags.AddFlagSet(cmd.Flags())
	flags.AddFlagSet(cmd.InheritedFlags())
	out := make([]string, len(args))
	copy(out, args)
	for i, a := range out {
		if a == "--" {
			break
		}
		if len(a) < 3 || a[0] != '-' || a[1] == '-' {
			continue
		}
		name, _, _ := strings.Cut(a[1:], "=")
		if len(name) > 1 && (flags.Lookup(name) != nil || name == "help" || name == "version") {
			out[i] = "-" + a
		}
	}
	depth := 0
	for c := cmd; c.HasParent(); c = c.Parent() {
		depth++
	}
	return negativesAsArguments(flags, out, depth)
}

// isNegativeNumber reports whether a is -N or -N.N.
func isNegativeNumber(a string) bool {
	return len(a) > 1 && a[0] == '-' && isJSONNumber(a)
}

// negativesAsArguments moves the arguments after "--" when one of them is a
// negative number, which the flag parser would take for a shorthand. The
// first depth arguments name the command and stay first.
func negativesAsArguments(flags *pflag.FlagSet, args []string, depth int) []string {
	var opts, pos []string
	found := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			pos = append(pos, args[i+1:]...)
			i = len(args)
		case isNegativeNumber(a):
			pos = append(pos, a)
			found = true
		case len(a) > 1 && a[0] == '-':
			opts = append(opts, a)
			if takesValue(flags, a) && i+1 < len(args) {
				i++
				opts = append(opts, args[i])
			}
		default:
			pos = append(pos, a)
		}
	}
	if !found || len(pos) < depth {
		return args
	}
	out := append([]string(nil), pos[:depth]...)
	out = append(out, opts...)
	out = append(out, "--")
	return append(out, pos[depth:]...)
}

// takesValue reports whether flag argument a (--name or -x, without an
// "=value" or a value stuck to it) takes the next argument as its value.
func takesValue(flags *pflag.FlagSet, a string) bool {
	var f *pflag.Flag
	if strings.HasPrefix(a, "--") {
		if strings.Contains(a, "=") {
			return false
		}
		f = flags.Lookup(a[2:])
	} else {
		if len(a) != 2 {
			return false // -xVALUE or clustered shorthands
		}
		f = flags.ShorthandLookup(a[1:])
	}
	return f != nil && f.NoOptDefVal == ""
}
