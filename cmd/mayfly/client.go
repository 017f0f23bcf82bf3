package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// apiClient talks to a running server's HTTP API.
type apiClient struct {
	base       string
	user, pass string
	http       *http.Client
}

// newAPIClient is a client of host authenticating as userPass ("user:password",
// as curl's -u). An empty userPass falls back on $MAYFLY_USER and
// $MAYFLY_PASSWORD.
func newAPIClient(host, userPass string) (*apiClient, error) {
	if !strings.Contains(host, "://") {
		host = "http://" + host
	}
	c := &apiClient{base: strings.TrimRight(host, "/"), http: &http.Client{Timeout: 30 * time.Second}}
	if userPass == "" {
		c.user, c.pass = os.Getenv("MAYFLY_USER"), os.Getenv("MAYFLY_PASSWORD")
		return c, nil
	}
	u, p, ok := strings.Cut(userPass, ":")
	if !ok || u == "" {
		return nil, errors.New("-u takes user:password")
	}
	c.user, c.pass = u, p
	return c, nil
}

// do sends a request and decodes a JSON answer into out (if not nil). A
// non-2xx answer becomes an error carrying the server's reason.
func (c *apiClient) do(ctx context.Context, method, path string, form url.Values, out any) error {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return err
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if c.user != "" {
		req.SetBasicAuth(c.user, c.pass)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var e struct{ Error, Reason string }
		if json.Unmarshal(data, &e) == nil && e.Reason != "" {
			if resp.StatusCode == http.StatusUnauthorized && c.user == "" {
				return fmt.Errorf("%s (%s): give -u user:password or set MAYFLY_USER and MAYFLY_PASSWORD", e.Reason, e.Error)
			}
			return fmt.Errorf("%s (%s)", e.Reason, e.Error)
		}
		return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(data)))
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

// clientFlags builds the flag set of a client sub-command with the flags they
// share: --host, -u and -b. usage is the text before the flag list.
func clientFlags(name, usage string, stderr io.Writer) (fs *flag.FlagSet, host, userPass, bucket *string) {
	fs = flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	host = fs.String("host", "127.0.0.1:8091", "server's HTTP address (http://... or https://...)")
	userPass = fs.String("u", "", "user:password (default $MAYFLY_USER and $MAYFLY_PASSWORD)")
	bucket = fs.String("b", "default", "bucket")
	fs.Usage = func() {
		fmt.Fprintln(stderr, usage+"\n\nflags:")
		fs.PrintDefaults()
	}
	return fs, host, userPass, bucket
}

// parseFlags parses args, turning flag errors into errHelp or errUsage (the
// flag package has already explained them).
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return errHelp
		}
		return errUsage
	}
	return nil
}
