package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

// ddocName is a design document's name without "_design/".
func ddocName(arg string) (string, error) {
	name := strings.TrimPrefix(arg, "_design/")
	if name == "" || strings.Contains(name, "/") {
		return "", usagef("a design document name is NAME or _design/NAME, got %q", arg)
	}
	return name, nil
}

// ddocPath is /BUCKET/_design/NAME.
func (o *clientOptions) ddocPath(name string) string {
	return "/" + url.PathEscape(o.bucket) + "/_design/" + url.PathEscape(name)
}

// newDDocCmd is `mayfly ddoc put|get|rm|ls`.
func newDDocCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ddoc put|get|rm|ls",
		Short: "Write, read, delete and list design documents",
		Long: `Design documents hold a bucket's views: {"views":{"NAME":{"map":"function
(doc, meta) {...}","reduce":"_count"}}}. A name starting with dev_ is a
development design document.`,
		Args: cobra.ArbitraryArgs,
		RunE: needSubcommand,
	}
	cmd.AddCommand(newDDocPutCmd(), newDDocGetCmd(), newDDocRmCmd(), newDDocLsCmd())
	return cmd
}

func newDDocPutCmd() *cobra.Command {
	var o clientOptions
	cmd := &cobra.Command{
		Use:     "put NAME FILE|-",
		Short:   "Write a design document from a file (or standard input)",
		Example: "  mayfly ddoc put scores scores-ddoc.json\n  echo '{\"views\":{\"all\":{\"map\":\"function(d,m){emit(m.id,null)}\"}}}' | mayfly ddoc put dev_all -",
		Args:    exactArgs(2, "NAME and FILE (or - for standard input)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := ddocName(args[0])
			if err != nil {
				return err
			}
			body, err := readFileOrStdin(cmd, args[1])
			if err != nil {
				return err
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			var res struct {
				ID string `json:"id"`
			}
			if err := c.call(cmd.Context(), http.MethodPut, o.ddocPath(name), "application/json", bytes.NewReader(body), &res); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "stored %s\n", res.ID)
			return nil
		},
	}
	addClientFlags(cmd, &o, true)
	return cmd
}

func newDDocGetCmd() *cobra.Command {
	var o clientOptions
	cmd := &cobra.Command{
		Use:   "get NAME",
		Short: "Print a design document",
		Args:  exactArgs(1, "one NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := ddocName(args[0])
			if err != nil {
				return err
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			var data []byte
			if err := c.call(cmd.Context(), http.MethodGet, o.ddocPath(name), "", nil, &data); err != nil {
				return err
			}
			var pretty bytes.Buffer
			if json.Indent(&pretty, data, "", "  ") == nil {
				data = pretty.Bytes()
			}
			printLine(cmd.OutOrStdout(), data)
			return nil
		},
	}
	addClientFlags(cmd, &o, true)
	return cmd
}

func newDDocRmCmd() *cobra.Command {
	var o clientOptions
	cmd := &cobra.Command{
		Use:     "rm NAME",
		Aliases: []string{"delete"},
		Short:   "Delete a design document (and its index)",
		Args:    exactArgs(1, "one NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := ddocName(args[0])
			if err != nil {
				return err
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			var res struct {
				ID string `json:"id"`
			}
			if err := c.call(cmd.Context(), http.MethodDelete, o.ddocPath(name), "", nil, &res); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted %s\n", res.ID)
			return nil
		},
	}
	addClientFlags(cmd, &o, true)
	return cmd
}

func newDDocLsCmd() *cobra.Command {
	var o clientOptions
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the bucket's design documents and their views",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			var data []byte
			if err := c.call(cmd.Context(), http.MethodGet, o.bucketPath()+"/ddocs", "", nil, &data); err != nil {
				return err
			}
			stdout := cmd.OutOrStdout()
			if asJSON {
				printLine(stdout, data)
				return nil
			}
			var list struct {
				Rows []struct {
					Doc struct {
						Meta struct {
							ID string `json:"id"`
						} `json:"meta"`
						JSON struct {
							Views map[string]struct {
								Reduce string `json:"reduce"`
							} `json:"views"`
						} `json:"json"`
					} `json:"doc"`
				} `json:"rows"`
			}
			if err := json.Unmarshal(data, &list); err != nil {
				return fmt.Errorf("the server's answer is not the JSON expected: %s", jsonReason(err))
			}
			if len(list.Rows) == 0 {
				fmt.Fprintf(stdout, "no design documents in %s\n", o.bucket)
				return nil
			}
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tVIEWS")
			for _, r := range list.Rows {
				var vs []string
				for v, def := range r.Doc.JSON.Views {
					if def.Reduce != "" {
						v += " (reduce " + def.Reduce + ")"
					}
					vs = append(vs, v)
				}
				sort.Strings(vs)
				fmt.Fprintf(tw, "%s\t%s\n", strings.TrimPrefix(r.Doc.Meta.ID, "_design/"), strings.Join(vs, ", "))
			}
			return tw.Flush()
		},
	}
	addClientFlags(cmd, &o, true)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the server's JSON answer")
	return cmd
}
