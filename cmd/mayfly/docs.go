package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"

	"github.com/spf13/cobra"
)

// docOptions are the flags of the document commands.
type docOptions struct {
	clientOptions
	collection string
}

// addDocFlags adds the client flags and --collection.
func addDocFlags(cmd *cobra.Command, o *docOptions) {
	addClientFlags(cmd, &o.clientOptions, true)
	cmd.Flags().StringVar(&o.collection, "collection", "", "scope.collection (default _default._default)")
}

// docPath is /BUCKET/docs/KEY[suffix]?collection=..&more.
func (o *docOptions) docPath(key, suffix string, q url.Values) string {
	if q == nil {
		q = url.Values{}
	}
	if o.collection != "" {
		q.Set("collection", o.collection)
	}
	p := "/" + url.PathEscape(o.bucket) + "/docs/" + url.PathEscape(key) + suffix
	if len(q) > 0 {
		p += "?" + q.Encode()
	}
	return p
}

// printLine writes data, then a newline unless it ends with one.
func printLine(w io.Writer, data []byte) {
	w.Write(data)
	if len(data) == 0 || data[len(data)-1] != '\n' {
		io.WriteString(w, "\n")
	}
}

// newGetCmd is `mayfly get KEY`.
func newGetCmd() *cobra.Command {
	var o docOptions
	var meta bool
	cmd := &cobra.Command{
		Use:   "get KEY",
		Short: "Print a document's value",
		Long: `Prints a document's value. With --meta, prints {"meta":{...},"json":value}:
id, cas, rev, seq, expiration (Unix seconds, 0 for never), flags, type.`,
		Example: "  mayfly get airline_10 -b travel\n  mayfly get user::42 --collection app.users --meta",
		Args:    exactArgs(1, "one KEY"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			q := url.Values{}
			if meta {
				q.Set("meta", "true")
			}
			var data []byte
			if err := c.call(cmd.Context(), http.MethodGet, o.docPath(args[0], "", q), "", nil, &data); err != nil {
				return err
			}
			printLine(cmd.OutOrStdout(), data)
			return nil
		},
	}
	addDocFlags(cmd, &o)
	cmd.Flags().BoolVar(&meta, "meta", false, "print the metadata with the value")
	return cmd
}

// readArgOrStdin is arg itself, or standard input when arg is "-".
func readArgOrStdin(cmd *cobra.Command, arg string) ([]byte, error) {
	if arg != "-" {
		return []byte(arg), nil
	}
	data, err := io.ReadAll(cmd.InOrStdin())
	if err != nil {
		return nil, fmt.Errorf("reading standard input: %w", err)
	}
	return data, nil
}

// newPutCmd is `mayfly put KEY JSON|-`.
func newPutCmd() *cobra.Command {
	var o docOptions
	var expiry int64
	var op string
	cmd := &cobra.Command{
		Use:   "put KEY JSON|-",
		Short: "Write a document (JSON given, or read from standard input)",
		Long: `Writes a document: the JSON value given, or standard input with "-". Prints
the server's answer: {"id","cas","rev","seq","expiration"}.

--expiry N: N seconds from now if N is at most 30 days (2592000), else a Unix
time; 0 keeps the bucket's or collection's default. --op insert fails if the
document exists, --op replace if it does not.`,
		Example: `  mayfly put user::1 '{"name":"Ada"}' --expiry 3600
  echo '{"name":"Bob"}' | mayfly put user::2 - --collection app.users`,
		Args: exactArgs(2, "KEY and JSON (or - for standard input)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			body, err := readArgOrStdin(cmd, args[1])
			if err != nil {
				return err
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			q := url.Values{}
			if expiry != 0 {
				q.Set("expiry", strconv.FormatInt(expiry, 10))
			}
			if op != "" && op != "upsert" {
				q.Set("op", op)
			}
			var data []byte
			if err := c.call(cmd.Context(), http.MethodPut, o.docPath(args[0], "", q), "application/json", bytes.NewReader(body), &data); err != nil {
				return err
			}
			printLine(cmd.OutOrStdout(), data)
			return nil
		},
	}
	addDocFlags(cmd, &o)
	cmd.Flags().Int64Var(&expiry, "expiry", 0, "expiry: seconds from now (up to 30 days) or a Unix time; 0 for the default")
	cmd.Flags().StringVar(&op, "op", "upsert", "upsert, insert (must not exist) or replace (must exist)")
	return cmd
}

// newRmCmd is `mayfly rm KEY`.
func newRmCmd() *cobra.Command {
	var o docOptions
	cmd := &cobra.Command{
		Use:     "rm KEY",
		Aliases: []string{"delete"},
		Short:   "Delete a document",
		Example: "  mayfly rm user::1",
		Args:    exactArgs(1, "one KEY"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			var data []byte
			if err := c.call(cmd.Context(), http.MethodDelete, o.docPath(args[0], "", nil), "", nil, &data); err != nil {
				return err
			}
			printLine(cmd.OutOrStdout(), data)
			return nil
		},
	}
	addDocFlags(cmd, &o)
	return cmd
}

// newTouchCmd is `mayfly touch KEY --expiry N`.
func newTouchCmd() *cobra.Command {
	var o docOptions
	var expiry int64
	cmd := &cobra.Command{
		Use:     "touch KEY --expiry N",
		Short:   "Change a document's expiry without changing its value",
		Long:    "Sets a document's expiry: N seconds from now (up to 30 days) or a Unix time; 0 removes it.",
		Example: "  mayfly touch session::9 --expiry 600",
		Args:    exactArgs(1, "one KEY"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("expiry") {
				return usagef("--expiry N is required")
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			q := url.Values{"expiry": {strconv.FormatInt(expiry, 10)}}
			var data []byte
			if err := c.call(cmd.Context(), http.MethodPost, o.docPath(args[0], "/touch", q), "", nil, &data); err != nil {
				return err
			}
			printLine(cmd.OutOrStdout(), data)
			return nil
		},
	}
	addDocFlags(cmd, &o)
	cmd.Flags().Int64Var(&expiry, "expiry", 0, "seconds from now (up to 30 days) or a Unix time; 0 for none (required)")
	return cmd
}

// readFileOrStdin is the file's content, or standard input's when name is
// "-".
func readFileOrStdin(cmd *cobra.Command, name string) ([]byte, error) {
	if name == "-" {
		return readArgOrStdin(cmd, "-")
	}
	return os.ReadFile(name)
}
