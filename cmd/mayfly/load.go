package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
)

// errReported is a failure already explained on stderr: exit code 1 and no
// further message.
var errReported = errors.New("reported")

// loadOptions are `mayfly load`'s flags.
type loadOptions struct {
	docOptions
	format      string
	keyColumn   string
	idField     string
	expiry      int64
	concurrency int
	batch       int
	progress    string
}

// newLoadCmd is `mayfly load FILE|-`.
func newLoadCmd() *cobra.Command {
	var o loadOptions
	cmd := &cobra.Command{
		Use:   "load FILE|-",
		Short: "Bulk-load documents from NDJSON, a JSON array or CSV",
		Long: `Loads documents through the bulk endpoint (POST /BUCKET/_bulk), streaming: the
file is never held in memory. FILE "-" reads standard input.

Formats (--format, or guessed from the extension and the first byte):
  ndjson  one JSON object a line
  json    a JSON array of objects
  csv     a header line, then one document a line: the --key-column value
          is the id, every other column a field (numbers stay numbers)
  bulk    one POST /BUCKET/_bulk line a line, as mayfly export writes them:
          {"op":"upsert","id":..,"doc":..,"collection":..,"flags":..,"expiry":..}
          sent as they are (an absolute expiry stays the same time);
          --collection and --expiry, when given, replace the lines' own.
          NDJSON whose first line starts with an "op" field is read so,
          unless --format ndjson says otherwise.

A JSON document's id is its --id-field (default: "_id", else "id"); the
document is stored as given. A line that cannot be loaded fails alone: the
others are loaded, the failures are summed up by reason at the end (with
the first ids or lines), and the exit code is 1.

On a terminal, a progress bar on stderr shows documents loaded, the rate and
the time left; otherwise one summary line is printed at the end.`,
		Example: `  mayfly load airlines.ndjson -b travel
  mayfly load people.csv --key-column email --collection app.people --expiry 86400
  curl -s https://example.com/dump.json | mayfly load - --format json
  mayfly export - -b travel --host http://old:8091 | mayfly load - -b travel --host http://new:8091`,
		Args: exactArgs(1, "FILE (or - for standard input)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.concurrency < 1 || o.batch < 1 {
				return usagef("--concurrency and --batch must be at least 1")
			}
			switch o.format {
			case "", formatNDJSON, formatArray, formatCSV, formatBulk:
			default:
				return usagef("--format must be ndjson, json, csv or bulk, got %q", o.format)
			}
			switch o.progress {
			case "auto", "always", "never":
			default:
				return usagef("--progress must be auto, always or never, got %q", o.progress)
			}
			if err := checkCollectionFlag(o.collection); err != nil {
				return err
			}
			return runLoad(cmd, &o, args[0])
		},
	}
	addDocFlags(cmd, &o.docOptions)
	fs := cmd.Flags()
	fs.StringVar(&o.format, "format", "", "ndjson, json (an array), csv or bulk (_bulk lines) (default: from the extension, else the first line)")
	fs.StringVar(&o.keyColumn, "key-column", "id", "CSV: the column holding each document's key")
	fs.StringVar(&o.idField, "id-field", "", `JSON: the field holding each document's id (default "_id", else "id")`)
	fs.Int64Var(&o.expiry, "expiry", 0, "expiry of every document: seconds from now (up to 30 days) or a Unix time; 0 for the default")
	fs.IntVar(&o.concurrency, "concurrency", 4, "bulk requests in flight at once")
	fs.IntVar(&o.batch, "batch", 1000, "documents per bulk request")
	fs.StringVar(&o.progress, "progress", "auto", "progress bar on stderr: auto (when it is a terminal), always or never")
	_ = cmd.RegisterFlagCompletionFunc("format", cobra.FixedCompletions([]string{formatNDJSON, formatArray, formatCSV, formatBulk}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("progress", cobra.FixedCompletions([]string{"auto", "always", "never"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// maxBusyRetries is how many times a batch refused with 503 (the server
// answering its most requests at once) is sent again.
const maxBusyRetries = 5

// maxBatchBytes ends a batch early when its documents are large: memory
// stays bounded by (concurrency + 2) batches whatever the documents' sizes.
const maxBatchBytes = 8 << 20

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// loadBatch is one bulk request's worth of operations.
type loadBatch struct {
	body   bytes.Buffer
	ids    []string
	where  []string
	ends   []int  // where each operation's line ends in body
	upsert []bool // whether the operation is an upsert: safe to send again when its outcome is unknown
}

// add appends an operation's line (with its newline) to the batch.
func (b *loadBatch) add(line []byte, id, where string, upsert bool) {
	b.body.Write(line)
	b.ids = append(b.ids, id)
	b.where = append(b.where, where)
	b.ends = append(b.ends, b.body.Len())
	b.upsert = append(b.upsert, upsert)
}

// line is operation i's line.
func (b *loadBatch) line(i int) []byte {
	start := 0
	if i > 0 {
		start = b.ends[i-1]
	}
	return b.body.Bytes()[start:b.ends[i]]
}

// failureClass sums up the failures of one reason.
type failureClass struct {
	count  int
	reason string   // the first one's
	first  []string // the first few ids or positions
}

// loadTally counts what a load did; safe for concurrent use.
type loadTally struct {
	loaded atomic.Int64
	failed atomic.Int64
	mu     sync.Mutex
	byCode map[string]*failureClass
}

// maxFirst is how many ids or positions a failure class keeps.
const maxFirst = 5

func (t *loadTally) fail(code, reason, what string) {
	t.failed.Add(1)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byCode == nil {
		t.byCode = map[string]*failureClass{}
	}
	fc := t.byCode[code]
	if fc == nil {
		fc = &failureClass{reason: reason}
		t.byCode[code] = fc
	}
	fc.count++
	if len(fc.first) < maxFirst {
		fc.first = append(fc.first, what)
	}
}

// opLine appends one bulk operation line to buf.
func opLine(buf *bytes.Buffer, id string, doc []byte, expiry int64, collection string) {
	buf.WriteString(`{"op":"upsert","id":`)
	idJSON, _ := json.Marshal(id)
	buf.Write(idJSON)
	buf.WriteString(`,"doc":`)
	buf.Write(doc)
	if expiry != 0 {
		buf.WriteString(`,"expiry":`)
		buf.WriteString(strconv.FormatInt(expiry, 10))
	}
	if collection != "" {
		c, _ := json.Marshal(collection)
		buf.WriteString(`,"collection":`)
		buf.Write(c)
	}
	buf.WriteString("}\n")
}

// formatOf is the format --format or the file's extension names, "" to
// sniff.
func formatOf(flag, name string) string {
	if flag != "" {
		return flag
	}
	switch strings.ToLower(filepath.Ext(name)) {
	case ".csv":
		return formatCSV
	case ".ndjson", ".jsonl":
		return formatNDJSON
	}
	return ""
}

func runLoad(cmd *cobra.Command, o *loadOptions, name string) error {
	c, err := o.client()
	if err != nil {
		return err
	}
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	var in io.Reader = cmd.InOrStdin()
	total := int64(-1)
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
			total = st.Size()
		}
		in = f
	}
	counted := &countingReader{r: in}
	br := bufio.NewReaderSize(counted, 256<<10)
	format := formatOf(o.format, name)
	guessed := format == ""
	if guessed {
		if format, err = sniffFormat(br); err != nil {
			return fmt.Errorf("reading %s: %w", name, err)
		}
	} else {
		skipBOM(br) // sniffFormat skips it too
	}
	if format == formatNDJSON && o.format == "" && looksBulk(br) {
		format = formatBulk // mayfly export's lines: their fields are kept
	}

	ctx, cancel := context.WithCancelCause(cmd.Context())
	defer cancel(nil)
	var tally loadTally
	start := time.Now() // wall clock: load rate
	var bar *loadProgress
	if o.progress == "always" || (o.progress == "auto" && isTerminal(stderr)) {
		bar = newLoadProgress(stderr, total, counted, &tally, start)
	}

	// Batches flow from the reader to the senders; at most concurrency+1
	// of them exist at once, so memory is bounded whatever the input.
	batches := make(chan *loadBatch, o.concurrency)
	var wg sync.WaitGroup
	for range o.concurrency {
		wg.Go(func() {
			for b := range batches {
				if ctx.Err() != nil {
					continue // drain
				}
				if err := sendBatch(ctx, c, o.bucket, b, &tally); err != nil {
					cancel(err)
				}
			}
		})
	}

	cur := &loadBatch{}
	flush := func() error {
		if len(cur.ids) == 0 {
			return nil
		}
		select {
		case batches <- cur:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		cur = &loadBatch{}
		return nil
	}
	var scratch bytes.Buffer
	emit := func(it loadItem) error {
		if it.code != "" {
			tally.fail(it.code, it.where+": "+it.err, it.where)
			return nil
		}
		scratch.Reset()
		if it.line != nil {
			scratch.Write(it.line)
			scratch.WriteByte('\n')
		} else {
			opLine(&scratch, it.id, it.doc, o.expiry, o.collection)
		}
		cur.add(scratch.Bytes(), it.id, it.where, it.line == nil || it.upsert)
		if len(cur.ids) >= o.batch || cur.body.Len() >= maxBatchBytes {
			return flush()
		}
		return nil
	}
	ids := newIDFinder(o.idField)
	var readErr error
	switch format {
	case formatCSV:
		readErr = readCSV(br, o.keyColumn, emit)
		var stop *errStop
		if guessed && errors.As(readErr, &stop) {
			// Input that is not JSON from its first byte is taken for CSV:
			// say so, for a JSON file whose first line is not JSON.
			stop.reason += " (the input was taken for CSV, as its first byte is not JSON's; --format ndjson or json says otherwise)"
		}
	case formatArray:
		readErr = readArray(br, ids, emit)
	case formatBulk:
		bi := &bulkItems{collection: o.collection, expiry: o.expiry}
		readErr = readNDJSON(br, bi.item, emit)
	default:
		readErr = readNDJSON(br, func(where string, raw []byte) loadItem { return jsonItem(where, raw, ids) }, emit)
	}
	var stop *errStop
	if readErr == nil || errors.As(readErr, &stop) {
		// What was read before a stop is loaded too.
		if err := flush(); err != nil {
			readErr = err
		}
	}
	close(batches)
	wg.Wait()
	took := time.Since(start) // wall clock: load rate
	if bar != nil {
		bar.finish()
	}

	fatal := context.Cause(ctx)
	if fatal == nil && cmd.Context().Err() != nil {
		fatal = cmd.Context().Err()
	}
	if errors.As(readErr, &stop) {
		tally.fail("unreadable_input", stop.reason, "")
	} else if readErr != nil && fatal == nil {
		fatal = readErr
	}
	loaded, failed := tally.loaded.Load(), tally.failed.Load()
	fmt.Fprintf(stdout, "loaded %d documents into %s in %s (%s docs/s)", loaded, o.bucket, took.Round(time.Millisecond), humanRate(loaded, took))
	if failed > 0 {
		fmt.Fprintf(stdout, "; %d failed", failed)
	}
	fmt.Fprintln(stdout)
	printFailures(stderr, &tally)
	if fatal != nil {
		return fmt.Errorf("load stopped: %w", fatal)
	}
	if failed > 0 {
		return errReported
	}
	return nil
}

// printFailures sums up the failures by reason, most frequent first.
func printFailures(w io.Writer, t *loadTally) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.byCode) == 0 {
		return
	}
	codes := make([]string, 0, len(t.byCode))
	for code := range t.byCode {
		codes = append(codes, code)
	}
	sort.Slice(codes, func(i, j int) bool {
		a, b := t.byCode[codes[i]], t.byCode[codes[j]]
		if a.count != b.count {
			return a.count > b.count
		}
		return codes[i] < codes[j]
	})
	fmt.Fprintln(w, "failures by reason:")
	for _, code := range codes {
		fc := t.byCode[code]
		fmt.Fprintf(w, "  %s: %d, e.g. %s\n", code, fc.count, fc.reason)
		first := slicesNonEmpty(fc.first)
		if len(first) > 0 {
			more := ""
			if fc.count > len(first) {
				more = ", ..."
			}
			fmt.Fprintf(w, "    first: %s%s\n", strings.Join(first, ", "), more)
		}
	}
}

func slicesNonEmpty(s []string) []string {
	out := s[:0:0]
	for _, v := range s {
		if v != "" {
			out = append(out, v)
		}
	}
	return out
}

// humanRate is n over d per second, rounded for reading.
func humanRate(n int64, d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	r := float64(n) / d.Seconds()
	if r >= 100 {
		return strconv.FormatInt(int64(r+0.5), 10)
	}
	return strconv.FormatFloat(r, 'f', 1, 64)
}

// bulkResult is one line of the bulk endpoint's answer.
type bulkResult struct {
	ID     *string `json:"id"`
	Line   int     `json:"line"`
	Error  string  `json:"error"`
	Reason string  `json:"reason"`
}

// sendBatch posts one batch and tallies its answer lines, which come in the
// order of the operations. An error is returned only when the request as a
// whole failed (the server unreachable, the bucket missing, a refusal):
// that ends the load.
//
// A server at its limit of concurrent requests (503) is given the time its
// Retry-After asks, up to maxBusyRetries times. So is an operation the
// server answered too_many_requests alone (a cluster node forwards the
// lines whose partition another node leads to that node in batches, and
// that node may stay at its limit longer than the forwarding node waits),
// and an upsert whose outcome the answer left unknown
// (temporary_failure: a partition's leader changed, or none yet; timeout):
// those are sent again in a batch of their own, after a wait that doubles
// each time, up to maxBusyRetries times.
func sendBatch(ctx context.Context, c *apiClient, bucket string, b *loadBatch, t *loadTally) error {
	wait := lineRetryWait
	for attempt := 0; ; attempt++ {
		again, err := postBatch(ctx, c, bucket, b, t, attempt < maxBusyRetries)
		if err != nil || again == nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait *= 2
		b = again
	}
}

// lineRetryWait is the first wait before operations answered "retry" are
// sent again (then 2, 4, ... times as long).
const lineRetryWait = 200 * time.Millisecond

// retryable reports whether an operation answered with error code can be
// sent again: one refused before it ran, or an upsert (whose second run
// writes what the first did) whose outcome is unknown.
func retryable(code string, upsert bool) bool {
	switch code {
	case "too_many_requests":
		return true
	case "temporary_failure", "timeout":
		return upsert
	}
	return false
}

// postBatch posts b and tallies its answer lines; with retry, the
// operations that may be sent again (retryable) are not tallied but
// returned as a batch of their own (nil when none).
func postBatch(ctx context.Context, c *apiClient, bucket string, b *loadBatch, t *loadTally, retry bool) (*loadBatch, error) {
	var resp *http.Response
	for attempt := 0; ; attempt++ {
		req, err := c.newRequest(ctx, http.MethodPost, "/"+url.PathEscape(bucket)+"/_bulk", bytes.NewReader(b.body.Bytes()))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/x-ndjson")
		resp, err = c.send(req)
		var se *statusError
		if err == nil || !errors.As(err, &se) || se.status != http.StatusServiceUnavailable || attempt == maxBusyRetries {
			if err != nil {
				return nil, err
			}
			break
		}
		wait := time.Second
		if n, perr := strconv.Atoi(se.retryAfter); perr == nil && n >= 0 && n <= 60 {
			wait = time.Duration(n) * time.Second
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(wait):
		}
	}
	defer resp.Body.Close()
	var again *loadBatch
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	i := 0
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if i >= len(b.ids) {
			break
		}
		var r bulkResult
		switch err := json.Unmarshal(line, &r); {
		case err != nil:
			t.fail("bad_answer", "the server's answer line is not JSON: "+string(line), b.ids[i])
		case r.Error == "":
			t.loaded.Add(1)
		case retry && retryable(r.Error, b.upsert[i]):
			if again == nil {
				again = &loadBatch{}
			}
			again.add(b.line(i), b.ids[i], b.where[i], b.upsert[i])
		default:
			t.fail(r.Error, b.where[i]+": "+r.Reason, b.ids[i])
		}
		i++
	}
	for ; i < len(b.ids); i++ {
		reason := "the server's answer ended early"
		if err := sc.Err(); err != nil {
			reason += ": " + netReason(err)
		}
		t.fail("no_answer", reason, b.ids[i])
	}
	return again, nil
}
