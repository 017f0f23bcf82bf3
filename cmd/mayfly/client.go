package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// defaultHost is where client commands look for a server when neither
// --host nor $MAYFLY_HOST says.
const defaultHost = "http://127.0.0.1:8091"

// requestTimeout bounds a plain request (not a bulk load or a view query
// waiting for its index, which run as long as they must).
const requestTimeout = 30 * time.Second

// clientOptions are the flags every client command shares.
type clientOptions struct {
	host     string
	bucket   string
	user     string
	password string
	caCert   string
}

// addClientFlags adds --host, -u/--user, -p/--password, --cacert and, if
// withBucket, -b/--bucket to cmd.
func addClientFlags(cmd *cobra.Command, o *clientOptions, withBucket bool) {
	fs := cmd.Flags()
	host := os.Getenv("MAYFLY_HOST")
	if host == "" {
		host = defaultHost
	}
	fs.StringVar(&o.host, "host", host, "server's HTTP address, http://... or https://... ($MAYFLY_HOST)")
	fs.StringVarP(&o.user, "user", "u", "", "user name, or user:password as curl's -u (default $MAYFLY_USER)")
	fs.StringVarP(&o.password, "password", "p", "", "password (default $MAYFLY_PASSWORD)")
	fs.StringVar(&o.caCert, "cacert", "", "PEM file of the certificate authorities to trust for https (default: the system's)")
	if withBucket {
		fs.StringVarP(&o.bucket, "bucket", "b", "default", "bucket")
	}
}

// apiClient talks to a running server's HTTP API.
type apiClient struct {
	base       string
	user, pass string
	http       *http.Client
}

// client is the apiClient the options describe. Credentials: -u USER:PASS,
// or -u USER with -p PASS, each falling back on $MAYFLY_USER and
// $MAYFLY_PASSWORD.
func (o *clientOptions) client() (*apiClient, error) {
	host := o.host
	if !strings.Contains(host, "://") {
		host = "http://" + host
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// One command, few requests (a load's are batches of a thousand
	// documents): no idle connections left behind when the command ends.
	tr.DisableKeepAlives = true
	if o.caCert != "" {
		pem, err := os.ReadFile(o.caCert)
		if err != nil {
			return nil, fmt.Errorf("--cacert: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--cacert: no PEM certificate in %s", o.caCert)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	c := &apiClient{base: strings.TrimRight(host, "/"), http: &http.Client{Transport: tr}}
	c.user, c.pass = o.user, o.password
	if u, p, ok := strings.Cut(c.user, ":"); ok && c.pass == "" {
		c.user, c.pass = u, p
	}
	if c.user == "" {
		c.user = os.Getenv("MAYFLY_USER")
	}
	if c.pass == "" {
		c.pass = os.Getenv("MAYFLY_PASSWORD")
	}
	if c.user == "" && c.pass != "" {
		return nil, errors.New("a password without a user: give -u USER (or set MAYFLY_USER)")
	}
	return c, nil
}

// newRequest is a request to path (with its query) carrying the
// credentials.
func (c *apiClient) newRequest(ctx context.Context, method, path string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, err
	}
	if c.user != "" {
		req.SetBasicAuth(c.user, c.pass)
	}
	return req, nil
}

// send sends req and returns the answer when its status is 2xx; any other
// answer becomes an error carrying the server's reason (and the body is
// closed).
func (c *apiClient) send(req *http.Request) (*http.Response, error) {
	resp, err := c.http.Do(req)
	if err != nil {
		if ctxErr := req.Context().Err(); ctxErr != nil {
			return nil, fmt.Errorf("no answer from %s: %w", c.base, ctxErr)
		}
		return nil, fmt.Errorf("cannot reach %s: %s", c.base, netReason(err))
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return nil, &statusError{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), err: c.answerError(resp, data)}
}

// statusError is a non-2xx answer: its status, and the reason as an error.
type statusError struct {
	status     int
	retryAfter string
	err        error
}

func (e *statusError) Error() string { return e.err.Error() }

func (e *statusError) Unwrap() error { return e.err }

// netReason is a transport error without Go's "Get "URL": " wrapping.
func netReason(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return oe.Op + ": " + oe.Err.Error()
	}
	var ua x509.UnknownAuthorityError
	if errors.As(err, &ua) {
		return "the server's certificate is signed by an unknown authority (give --cacert FILE)"
	}
	var he x509.HostnameError
	if errors.As(err, &he) {
		return "the server's certificate is not for this host: " + cleanReason(he.Error())
	}
	return cleanReason(err.Error())
}

// answerError is the error a non-2xx answer stands for: the API's
// {"error":..,"reason":..}, the search service's {"status":"fail","error":..},
// or the status and body.
func (c *apiClient) answerError(resp *http.Response, data []byte) error {
	var e struct{ Status, Error, Reason string }
	if json.Unmarshal(data, &e) == nil {
		e.Reason = cleanReason(e.Reason)
		switch {
		case e.Reason != "" && resp.StatusCode == http.StatusUnauthorized && c.user == "":
			return fmt.Errorf("%s (%s): give -u user:password (or -u USER -p PASSWORD) or set MAYFLY_USER and MAYFLY_PASSWORD", e.Reason, e.Error)
		case e.Reason != "":
			return fmt.Errorf("%s (%s)", e.Reason, e.Error)
		case e.Error != "":
			return fmt.Errorf("%s (%s)", e.Error, resp.Status)
		}
	}
	return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(data)))
}

// goPackages are the prefixes Go errors carry that mean nothing to a user.
var goPackages = []string{"engine: ", "jsruntime: ", "views: ", "index: ", "pager: ", "search: ", "auth: ", "audit: ", "httpapi: ", "memcache: ", "json: ", "x509: ", "tls: "}

// cleanReason is a server's reason without Go package prefixes (a server
// that leaks them is fixed on its side; this keeps the command line clean
// against older ones).
func cleanReason(s string) string {
	for again := true; again; {
		again = false
		for _, p := range goPackages {
			if strings.HasPrefix(s, p) {
				s, again = s[len(p):], true
			}
		}
	}
	return s
}

// call sends a request with an optional body of the given content type and
// decodes a JSON answer into out (if not nil) or copies it to w (if not
// nil). It gives up after requestTimeout.
func (c *apiClient) call(ctx context.Context, method, path, contentType string, body io.Reader, out any) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, err := c.newRequest(ctx, method, path, body)
	if err != nil {
		return err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.send(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("reading the answer: %w", err)
	}
	switch o := out.(type) {
	case nil:
	case *[]byte:
		*o = data
	default:
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("the server's answer is not the JSON expected: %s", strings.TrimPrefix(err.Error(), "json: "))
		}
	}
	return nil
}

// do sends a request with an optional form and decodes a JSON answer into
// out (if not nil).
func (c *apiClient) do(ctx context.Context, method, path string, form url.Values, out any) error {
	if form == nil {
		return c.call(ctx, method, path, "", nil, out)
	}
	return c.call(ctx, method, path, "application/x-www-form-urlencoded", strings.NewReader(form.Encode()), out)
}

// postJSON posts in as JSON and decodes the answer into out.
func (c *apiClient) postJSON(ctx context.Context, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return c.call(ctx, http.MethodPost, path, "application/json", bytes.NewReader(body), out)
}

// bucketPath is /pools/default/buckets/BUCKET.
func (o *clientOptions) bucketPath() string {
	return "/pools/default/buckets/" + url.PathEscape(o.bucket)
}
