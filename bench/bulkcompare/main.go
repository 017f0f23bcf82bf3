// Command bulkcompare loads the same small JSON documents into Mayfly's
// POST /{bucket}/_bulk and into a CouchDB-compatible server's
// POST /{db}/_bulk_docs (pouchdb-server), over real HTTP, and prints the
// rate. bench/pouch.sh runs it against both servers, interleaved; it is not
// part of make test.
//
// Usage:
//
//	bulkcompare -target mayfly -url http://127.0.0.1:18091 -user U -pass P -db bench1 [-n 300000] [-batch 0]
//	bulkcompare -target pouch -url http://127.0.0.1:15985 -db bench1 [-n 300000] [-batch 1000]
//
// For Mayfly, -batch 0 sends every document in one streamed body (what _bulk
// is for); -batch N sends requests of N lines, one after the other, as the
// _bulk_docs side does. The database or bucket is created first and must not
// exist. The output is one line: target, batch, documents, seconds, docs/s.
package main

import (
	"bufio"
	"bytes"
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

func main() {
	target := flag.String("target", "mayfly", "mayfly or pouch")
	base := flag.String("url", "", "server base URL")
	user := flag.String("user", "", "user (Mayfly)")
	pass := flag.String("pass", "", "password (Mayfly)")
	db := flag.String("db", "bench", "bucket or database to create and load")
	n := flag.Int("n", 300000, "documents")
	batch := flag.Int("batch", -1, "documents per request (default: 0, one body, for mayfly; 1000 for pouch)")
	flag.Parse()
	if *batch < 0 {
		*batch = 0
		if *target == "pouch" {
			*batch = 1000
		}
	}
	c := &client{base: strings.TrimSuffix(*base, "/"), user: *user, pass: *pass}
	var err error
	var took time.Duration
	switch *target {
	case "mayfly":
		took, err = c.mayfly(*db, *n, *batch)
	case "pouch":
		took, err = c.pouch(*db, *n, *batch)
	default:
		err = fmt.Errorf("unknown target %q", *target)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bulkcompare:", err)
		os.Exit(1)
	}
	fmt.Printf("%s batch=%d docs=%d seconds=%.2f docs/s=%.0f\n", *target, *batch, *n, took.Seconds(), float64(*n)/took.Seconds())
}

// doc is document i's body: the same small document on both sides.
func doc(i int) string { return fmt.Sprintf(`{"n":%d,"name":"small"}`, i) }

func id(i int) string { return fmt.Sprintf("doc%07d", i) }

type client struct {
	base, user, pass string
}

func (c *client) do(method, path, contentType string, body io.Reader) (*http.Response, error) {
	req, err := http.NewRequest(method, c.base+path, body)
	if err != nil {
		return nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.user != "" {
		req.SetBasicAuth(c.user, c.pass)
	}
	return http.DefaultClient.Do(req)
}

// create makes the bucket or database (named in what, for errors) with one
// request, which must succeed.
func (c *client) create(method, path, contentType string, body io.Reader, what string) error {
	resp, err := c.do(method, path, contentType, body)
	if err != nil {
		return err
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		return fmt.Errorf("create %s: %d %s", what, resp.StatusCode, b)
	}
	return nil
}

// batches builds the request bodies for n documents, batch to a body (all
// in one if batch <= 0): write writes documents start to end-1 into one.
func batches(n, batch int, write func(buf *bytes.Buffer, start, end int)) [][]byte {
	if batch <= 0 {
		batch = n
	}
	var bodies [][]byte
	for start := 0; start < n; start += batch {
		var buf bytes.Buffer
		write(&buf, start, min(n, start+batch))
		bodies = append(bodies, buf.Bytes())
	}
	return bodies
}

// mayfly creates bucket db and loads it through _bulk.
func (c *client) mayfly(db string, n, batch int) (time.Duration, error) {
	if err := c.create("POST", "/pools/default/buckets", "application/x-www-form-urlencoded", strings.NewReader(url.Values{"name": {db}}.Encode()), "bucket "+db); err != nil {
		return 0, err
	}
	bodies := batches(n, batch, func(buf *bytes.Buffer, start, end int) {
		for i := start; i < end; i++ {
			fmt.Fprintf(buf, `{"op":"upsert","id":"%s","doc":%s}`+"\n", id(i), doc(i))
		}
	})
	began := time.Now() // wall clock: the load's rate
	for _, body := range bodies {
		resp, err := c.do("POST", "/"+db+"/_bulk", "application/x-ndjson", bytes.NewReader(body))
		if err != nil {
			return 0, err
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			if bytes.Contains(sc.Bytes(), []byte(`"error"`)) {
				resp.Body.Close()
				return 0, fmt.Errorf("_bulk answered %s", sc.Text())
			}
		}
		resp.Body.Close()
		if err := sc.Err(); err != nil {
			return 0, err
		}
		if resp.StatusCode != http.StatusOK {
			return 0, fmt.Errorf("_bulk: %d", resp.StatusCode)
		}
	}
	return time.Since(began), nil
}

// pouch creates database db and loads it through _bulk_docs.
func (c *client) pouch(db string, n, batch int) (time.Duration, error) {
	if err := c.create("PUT", "/"+db, "", nil, "database "+db); err != nil {
		return 0, err
	}
	bodies := batches(n, batch, func(buf *bytes.Buffer, start, end int) {
		buf.WriteString(`{"docs":[`)
		for i := start; i < end; i++ {
			if i > start {
				buf.WriteByte(',')
			}
			d := doc(i)
			fmt.Fprintf(buf, `{"_id":"%s",%s`, id(i), d[1:])
		}
		buf.WriteString(`]}`)
	})
	began := time.Now() // wall clock: the load's rate
	for _, body := range bodies {
		resp, err := c.do("POST", "/"+db+"/_bulk_docs", "application/json", bytes.NewReader(body))
		if err != nil {
			return 0, err
		}
		out, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return 0, err
		}
		if resp.StatusCode >= 300 {
			return 0, fmt.Errorf("_bulk_docs: %d %.200s", resp.StatusCode, out)
		}
		if bytes.Contains(out, []byte(`"error"`)) {
			return 0, errors.New("_bulk_docs answered an error: " + string(out[:min(len(out), 300)]))
		}
	}
	return time.Since(began), nil
}
