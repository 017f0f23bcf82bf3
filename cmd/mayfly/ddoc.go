package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

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

// ddocViews lists the bucket's design documents and their views' names, for
// `ddoc ls` and for shell completion.
func (o *clientOptions) ddocViews(ctx context.Context, c *apiClient) ([]ddocEntry, error) {
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
	if err := c.call(ctx, http.MethodGet, o.bucketPath()+"/ddocs", "", nil, &list); err != nil {
		return nil, err
	}
	out := make([]ddocEntry, 0, len(list.Rows))
	for _, r := range list.Rows {
		e := ddocEntry{name: strings.TrimPrefix(r.Doc.Meta.ID, "_design/"), reduce: map[string]string{}}
		for v, def := range r.Doc.JSON.Views {
			e.views = append(e.views, v)
			e.reduce[v] = def.Reduce
		}
		sort.Strings(e.views)
		out = append(out, e)
	}
	return out, nil
}

// ddocEntry is one design document of a listing.
type ddocEntry struct {
	name   string
	views  []string
	reduce map[string]string // view -> reduce function ("" for none)
}

// completeDDocs completes a design document name (withViews: DDOC/VIEW)
// from the server the command's flags name; nothing when it cannot be
// reached within a second.
func completeDDocs(o *clientOptions, withViews bool) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		c, err := o.client()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), time.Second)
		defer cancel()
		list, err := o.ddocViews(ctx, c)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []string
		for _, d := range list {
			if !withViews {
				out = append(out, d.name)
				continue
			}
			for _, v := range d.views {
				out = append(out, d.name+"/"+v)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// ddocPath is /BUCKET/_design/NAME.
func (o *clientOptions) ddocPath(name string) string {
	return "/" + url.PathEscape(o.bucket) + "/_design/" + url.PathEscape(name)
}

// newDDocCmd is `mayfly ddoc put|get|rm|ls`.
func newDDocCmd() *cobra.Command {
	return groupCmd("ddoc put|get|rm|ls", "Write, read, delete and list design documents",
		`Design documents hold a bucket's views: {"views":{"NAME":{"map":"function
(doc, meta) {...}","reduce":"_count"}}}. A name starting with dev_ is a
development design document.`,
		newDDocPutCmd(), newDDocGetCmd(), newDDocRmCmd(), newDDocLsCmd())
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
			return o.changeDDoc(cmd, http.MethodPut, name, body, "stored")
		},
	}
	addClientFlags(cmd, &o, true)
	return cmd
}

// changeDDoc sends method to design document name, with body as JSON when
// there is one, and prints done and the id the server answers with.
func (o *clientOptions) changeDDoc(cmd *cobra.Command, method, name string, body []byte, done string) error {
	c, err := o.client()
	if err != nil {
		return err
	}
	var in io.Reader
	ctype := ""
	if body != nil {
		in, ctype = bytes.NewReader(body), "application/json"
	}
	var res struct {
		ID string `json:"id"`
	}
	if err := c.call(cmd.Context(), method, o.ddocPath(name), ctype, in, &res); err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", done, res.ID)
	return nil
}

func newDDocGetCmd() *cobra.Command {
	var o clientOptions
	cmd := &cobra.Command{
		Use:               "get NAME",
		Short:             "Print a design document",
		Args:              exactArgs(1, "one NAME"),
		ValidArgsFunction: completeDDocs(&o, false),
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
		Use:               "rm NAME",
		Aliases:           []string{"delete"},
		Short:             "Delete a design document (and its index)",
		Args:              exactArgs(1, "one NAME"),
		ValidArgsFunction: completeDDocs(&o, false),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := ddocName(args[0])
			if err != nil {
				return err
			}
			return o.changeDDoc(cmd, http.MethodDelete, name, nil, "deleted")
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
			stdout := cmd.OutOrStdout()
			if asJSON {
				var data []byte
				if err := c.call(cmd.Context(), http.MethodGet, o.bucketPath()+"/ddocs", "", nil, &data); err != nil {
					return err
				}
				printLine(stdout, data)
				return nil
			}
			list, err := o.ddocViews(cmd.Context(), c)
			if err != nil {
				return err
			}
			if len(list) == 0 {
				fmt.Fprintf(stdout, "no design documents in %s\n", o.bucket)
				return nil
			}
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tVIEWS")
			for _, d := range list {
				vs := make([]string, len(d.views))
				for i, v := range d.views {
					vs[i] = v
					if r := d.reduce[v]; r != "" {
						vs[i] += " (reduce " + r + ")"
					}
				}
				fmt.Fprintf(tw, "%s\t%s\n", d.name, strings.Join(vs, ", "))
			}
			return tw.Flush()
		},
	}
	addClientFlags(cmd, &o, true)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the server's JSON answer")
	return cmd
}
