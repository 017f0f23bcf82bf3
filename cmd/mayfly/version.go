package main

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// versionText is what `mayfly version` and `mayfly --version` print: the
// module version, the Go version and, when the binary was built from a
// version-controlled checkout, the commit (vcs.revision) and its time.
func versionText() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "mayfly (unknown version: no build information)\n"
	}
	var b strings.Builder
	v := info.Main.Version
	if v == "" {
		v = "(devel)"
	}
	fmt.Fprintf(&b, "mayfly %s\ngo %s\n", v, strings.TrimPrefix(info.GoVersion, "go"))
	var rev, when, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = " (modified)"
			}
		}
	}
	if rev != "" {
		fmt.Fprintf(&b, "commit %s%s", rev, modified)
		if when != "" {
			fmt.Fprintf(&b, " %s", when)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// newVersionCmd is `mayfly version`.
func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, the Go version and the commit built from",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Fprint(cmd.OutOrStdout(), versionText())
			return nil
		},
	}
}
