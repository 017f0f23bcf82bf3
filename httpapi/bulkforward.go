package httpapi

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
	"sync"
	"time"

	"github.com/tidwall/gjson"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/internal/jsonstr"
)

// Forwarded _bulk lines. On a cluster node, a _bulk line whose key's
// partition another node leads is carried out by that node, and the
// lines bound for one node travel together: each _bulk request keeps, per
// node it forwards to, a queue of lines and at most bulkBatchesInFlight
// _bulk requests in flight to that node. A line that finds fewer in flight
// leaves at once, with whatever is queued; otherwise it waits in the queue
// and leaves with the next batch, as soon as one of those requests ends.
// So a lone line waits for nothing, and while a node works on a batch the
// lines arriving for it gather into the next one: batches grow with the
// load (up to bulkBatchMaxLines lines, bulkBatchMaxBytes bytes), and a node
// holds at most bulkBatchesInFlight admission slots for one client's
// request, however many lines that request sends it.
//
// A batch is one POST of the lines (each as the client sent it) to the
// node's _bulk, with the client's path, query, credentials and content
// type, marked forwarded (ForwardedHeader): the node authenticates and
// authorizes it as it would the client, and refuses, rather than forwards
// again, a line whose partition it does not lead. Its answer has one line
// per line sent, in order, streamed as they complete, and each answer line
// becomes its line's answer the moment it arrives. The lines of one
// document reach their node in their order: the request's pipeline chains
// a document's lines, so a line is routed (and queued) only once the one
// before it on the same document is answered.
//
// What a batch meets:
//   - The node cannot be reached (a failed dial: nothing was sent): each
//     line asks its route's Reroute once, as a single document's request
//     does, and goes where it says (batched there with that node's lines),
//     or runs here when this node leads it now; otherwise it answers
//     temporary_failure, not sent.
//   - The node refuses the whole request (credentials, a missing bucket):
//     every line of the batch answers that refusal. A refusal for want of
//     an admission slot (too_many_requests) applied nothing, so the batch
//     is sent again after a short wait, up to bulkOverloadRetries times.
//   - The answer breaks off (the node died, its connection broke, its
//     lease expired: Route.Gone): the lines answered keep their answers,
//     and each line not answered yet answers temporary_failure, its
//     outcome unknown (it was sent; it is not sent again).
//   - The answer stalls: once its head came, each answer line must come
//     within the server's bulkStall (Options.BulkLineTimeout: by default
//     forwardTimeout, the bound on the head itself), else the batch
//     breaks off as above.
//   - The node no longer leads a line's partition (leadership moved): it
//     answers that line with its refusal naming the leader (refusalLine:
//     "not my vbucket", and the leader in "leader"). That refusal is given
//     before anything of the line is done (see forward: the receiving
//     node routes the line first and refuses it rather than running it),
//     so the line was not applied and sending it again is safe whatever
//     its op (an insert is not done twice). As a single document's
//     request does (forward.go), the line asks its route's Reroute once
//     with the leader named, and goes where it says (batched there with
//     that node's lines), or runs here when this node leads it now;
//     otherwise, or when that node refuses it too, the line answers the
//     refusal. Its task waits meanwhile, so the document's next line is
//     not routed before it is answered: the order holds. A line is sent at
//     most three times: to its route, to Reroute("") after a failed dial,
//     to Reroute(leader) after a refusal. A node that routed the line to
//     itself, then found from its replication that another node leads now
//     (engine.NotMyVBucketError: refused before anything was proposed),
//     answers the same refusal line, "leader" and all; a refusal that
//     names no leader (the partition electing one) is answered as it is.
//
// A line the client's own node runs (its route says this node leads) may
// meet that refusal too: the line then goes to the leader named
// (Reroute(leader) of its route, once), as a refused forward's line does.

// errBatchStalled is the cause of a forwarded _bulk batch broken off
// because its node sent no further answer line in time (bulkStall).
var errBatchStalled = errors.New("no further answer line came")

// Bounds of forwarded _bulk batches.
const (
	// bulkBatchesInFlight is the most _bulk requests one client's _bulk
	// request has in flight to one node at a time.
	bulkBatchesInFlight = 2
	// bulkBatchMaxLines and bulkBatchMaxBytes bound a batch; a line
	// larger than bulkBatchMaxBytes goes alone.
	bulkBatchMaxLines = 1024
	bulkBatchMaxBytes = 16 << 20
	// bulkOverloadRetries is how many times a batch refused with
	// too_many_requests is sent again, after waits of bulkOverloadWait
	// doubling each time (10 ms, then 20 ms, ... 320 ms: 630 ms in all).
	bulkOverloadRetries = 6
	bulkOverloadWait    = 10 * time.Millisecond
	// maxBulkAnswer bounds the answer line a node sends for one forwarded
	// _bulk line (and the error body of a refused batch).
	maxBulkAnswer = 64 << 10
)

// bulkForwarder is one _bulk request's forwarding: a queue per node.
type bulkForwarder struct {
	s     *server
	r     *http.Request // the client's request
	b     *engine.Bucket
	sends sync.WaitGroup

	mu    sync.Mutex
	nodes map[string]*bulkNode // by name and address
}

// bulkNode is the lines of one request bound for one node.
type bulkNode struct {
	rt       Route      // the route of the node's latest line: name, address, From, Gone
	queued   []*fwdLine // waiting for the next batch, in the order they came
	inFlight int        // batches being sent or answered
}

// fwdLine is one forwarded line and what its node made of it.
type fwdLine struct {
	id   string
	raw  []byte // the line, without its end of line
	done chan struct{}
	// Set before done is closed: the answer line (ending in "\n"), or
	// the failure of the line's batch (notSent: nothing reached the node).
	ans     []byte
	err     error
	notSent bool
}

func (s *server) newBulkForwarder(r *http.Request, b *engine.Bucket) *bulkForwarder {
	return &bulkForwarder{s: s, r: r, b: b, nodes: make(map[string]*bulkNode)}
}

// wait waits for the batches' goroutines to end; every line was answered
// by then (the lines' tasks are done).
func (f *bulkForwarder) wait() {
	f.sends.Wait()
}

// line carries out one _bulk line (raw, parsed into sl): here when this
// node leads its key's partition, else at the node that does, and records
// the answer in sl. It returns once the line is answered.
//
// A line run here may be refused by this node's replication, naming the
// partition's leader, before anything of it was proposed (leadership
// moved and the route has not caught up: engine.FollowableLeader). A
// forwarded request's line answers that refusal with the leader in
// "leader" (refusalLine), for the forwarding node to follow; a line the
// client sent here goes to that leader as a refused forward's line does
// (rt.Reroute(leader)), and this node's refusal counts as the line's one
// refusal followed.
func (f *bulkForwarder) line(ctx context.Context, sl *bulkSlot, raw []byte) {
	s := f.s
	id := sl.op.id
	if err := engine.ValidateKey(id); err != nil {
		s.bulkApply(ctx, f.b, sl) // answered here, as the line is bad
		return
	}
	forwarded := f.r.Header.Get(ForwardedHeader) != ""
	rt, err := s.route(ctx, f.b.Name(), id)
	switch {
	case err != nil:
		sl.out = errorLine(&id, 0, classify(err))
		return
	case rt.Addr != "" && forwarded:
		// Refused before anything is done: the forwarding node may send
		// the line to the leader named.
		sl.out = refusalLine(id, rt.Node, classify(fmt.Errorf("%w: key %q's partition is led by node %s at http://%s; this node does not lead it and does not forward a request forwarded already",
			engine.ErrNotMyVBucket, id, rt.Node, rt.Addr)))
		return
	}
	var used rerouting
	for {
		if rt.Addr == "" {
			err := s.bulkApply(ctx, f.b, sl)
			leader := engine.FollowableLeader(err)
			switch {
			case leader == "":
				return
			case forwarded:
				sl.out = refusalLine(id, leader, classify(err))
				return
			case rt.Reroute == nil || used.refused:
				return
			}
			used.refused = true
			nrt, ok := rt.Reroute(ctx, leader)
			if !ok || nrt.Addr == "" {
				return // the refusal is the answer
			}
			rt = nrt
			continue
		}
		fl := &fwdLine{id: id, raw: raw, done: make(chan struct{})}
		f.add(rt, fl)
		<-fl.done
		// A line the node did not apply goes where Reroute says, or runs
		// here if this node leads it now: once after a failed dial (the
		// line was not sent), once after a refusal naming the leader
		// (the node does not lead the line's partition and did nothing
		// with it).
		again, leader := false, ""
		switch {
		case rt.Reroute == nil:
		case fl.notSent:
			again, used.unreachable = !used.unreachable, true
		case fl.err == nil && !used.refused:
			if leader = refusingLeader(fl.ans); leader != "" {
				again, used.refused = true, true
			}
		}
		if again {
			if nrt, ok := rt.Reroute(ctx, leader); ok {
				rt = nrt // run here when it has no Addr
				continue
			}
		}
		switch {
		case fl.err != nil && fl.notSent:
			sl.out = errorLine(&id, 0, classify(fmt.Errorf("%w: forwarding to the partition's leader, node %s at http://%s: %w (the line was not sent)",
				engine.ErrTempFail, rt.Node, rt.Addr, fl.err)))
		case fl.err != nil:
			sl.out = errorLine(&id, 0, classify(fmt.Errorf("%w: forwarding to the partition's leader, node %s at http://%s: %w (a write's outcome is unknown)",
				engine.ErrTempFail, rt.Node, rt.Addr, fl.err)))
		default:
			sl.out = fl.ans
		}
		return
	}
}

// refusalLine is the answer line of a forwarded line refused by a node
// that does not lead its partition (he, wrapping engine.ErrNotMyVBucket):
// errorLine with "leader", the node that leads it as this node knows it.
func refusalLine(id, leader string, he *httpError) []byte {
	out := errorLine(&id, 0, he)
	out = append(out[:len(out)-len("}\n")], `,"leader":`...)
	out = jsonstr.Append(out, leader)
	return append(out, "}\n"...)
}

// refusingLeader returns the leader a forwarded line's answer names when
// that answer is a refusal (refusalLine), else "".
func refusingLeader(ans []byte) string {
	if !bytes.Contains(ans, []byte(`"leader":`)) {
		return ""
	}
	r := gjson.GetManyBytes(ans, "error", "leader")
	if r[0].Str != "temporary_failure" || r[1].Type != gjson.String {
		return ""
	}
	return r[1].Str
}

// add queues fl for the node rt names, and starts a batch when that node
// has fewer than bulkBatchesInFlight.
func (f *bulkForwarder) add(rt Route, fl *fwdLine) {
	key := rt.Node + "@" + rt.Addr
	f.mu.Lock()
	n := f.nodes[key]
	if n == nil {
		n = &bulkNode{rt: rt}
		f.nodes[key] = n
	}
	// The latest route: a node that went down and came back has a new
	// Gone.
	n.rt = rt
	n.queued = append(n.queued, fl)
	if n.inFlight >= bulkBatchesInFlight {
		f.mu.Unlock()
		return
	}
	n.inFlight++
	batch := n.take()
	f.mu.Unlock()
	f.sends.Go(func() { f.run(n, rt, batch) })
}

// run sends batch to n's node, then the batches queued meanwhile, until
// none is left.
func (f *bulkForwarder) run(n *bulkNode, rt Route, batch []*fwdLine) {
	for len(batch) > 0 {
		f.send(rt, batch)
		f.mu.Lock()
		batch, rt = n.take(), n.rt
		if len(batch) == 0 {
			n.inFlight--
		}
		f.mu.Unlock()
	}
}

// take removes the next batch from the queue: its first lines, up to
// bulkBatchMaxLines and bulkBatchMaxBytes (one line at least). f.mu is
// held.
func (n *bulkNode) take() []*fwdLine {
	k, size := 0, 0
	for k < len(n.queued) && k < bulkBatchMaxLines {
		if k > 0 && size+len(n.queued[k].raw)+1 > bulkBatchMaxBytes {
			break
		}
		size += len(n.queued[k].raw) + 1
		k++
	}
	batch := n.queued[:k:k]
	if n.queued = n.queued[k:]; len(n.queued) == 0 {
		n.queued = nil
	}
	return batch
}

// send sends batch to the node rt names and answers each of its lines.
func (f *bulkForwarder) send(rt Route, batch []*fwdLine) {
	ctx, cancel := context.WithCancelCause(f.r.Context())
	defer cancel(nil)
	if rt.Gone != nil {
		go func() {
			select {
			case <-rt.Gone:
				cancel(errNodeGone)
			case <-ctx.Done():
			}
		}()
	}
	fail := func(lines []*fwdLine, err error, notSent bool) {
		if errors.Is(context.Cause(ctx), errNodeGone) {
			err = errNodeGone
		}
		if f.r.Context().Err() == nil { // else the client left
			f.s.log.Warn("forwarding _bulk lines to their partitions' leader", "leader", rt.Node, "addr", rt.Addr, "lines", len(lines), "err", err)
		}
		for _, fl := range lines {
			fl.err, fl.notSent = err, notSent
			close(fl.done)
		}
	}
	var resp *http.Response
	for attempt := 0; ; attempt++ {
		var err error
		resp, err = f.post(ctx, rt, batch)
		if err != nil {
			fail(batch, err, notSent(err))
			return
		}
		if resp.StatusCode == http.StatusOK {
			break
		}
		// The node refused the whole request: every line answers that.
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, maxBulkAnswer))
		resp.Body.Close()
		var e struct{ Error, Reason string }
		if json.Unmarshal(msg, &e) != nil || e.Error == "" {
			e.Error, e.Reason = "temporary_failure", fmt.Sprintf("node %s answered %d", rt.Node, resp.StatusCode)
		}
		if e.Error == errOverload.code && attempt < bulkOverloadRetries {
			// Refused for want of an admission slot, before the body
			// was read: nothing was applied, and the batch goes again.
			t := time.NewTimer(bulkOverloadWait << attempt)
			select {
			case <-t.C:
				continue
			case <-ctx.Done():
				t.Stop()
			}
		}
		he := &httpError{status: resp.StatusCode, code: e.Error, reason: e.Reason}
		for _, fl := range batch {
			fl.ans = errorLine(&fl.id, 0, he)
			close(fl.done)
		}
		return
	}
	defer resp.Body.Close()
	// Each answer line (and the answer's end, after the last) must come
	// within bulkStall of the one before, or of the head: a node that
	// stalls mid-batch, its lease holding, breaks the batch off as a
	// broken connection does.
	stall := time.AfterFunc(f.s.bulkStall, func() { cancel(errBatchStalled) })
	defer stall.Stop()
	br := bufio.NewReaderSize(resp.Body, 16<<10)
	i := 0
	for i < len(batch) {
		line, tooLong, err := readBulkLine(br, maxBulkAnswer)
		if err != nil {
			// A line cut by the end of the answer (or a broken one) is
			// no answer: the node may not have finished it.
			switch {
			case errors.Is(context.Cause(ctx), errBatchStalled):
				err = fmt.Errorf("it answered %d of the %d lines sent to it, then %w for %v", i, len(batch), errBatchStalled, f.s.bulkStall)
			case errors.Is(err, io.EOF):
				err = fmt.Errorf("it answered %d of the %d lines sent to it, then its answer ended", i, len(batch))
			}
			fail(batch[i:], err, false)
			return
		}
		stall.Reset(f.s.bulkStall)
		switch {
		case tooLong:
			batch[i].err = fmt.Errorf("its answer to the line is over %d bytes", maxBulkAnswer)
		case len(bytes.TrimSpace(line)) == 0:
			continue
		case bytes.HasPrefix(line, []byte(`{"error":`)):
			// An answer about the request, not a line (its body could
			// not be read on): the lines left are not answered.
			fail(batch[i:], fmt.Errorf("it answered %s after %d of the %d lines sent to it", line, i, len(batch)), false)
			return
		default:
			batch[i].ans = append(line, '\n')
		}
		close(batch[i].done)
		i++
	}
	// Read the answer to its end, so that the node has ended the request
	// (and freed its admission slot) before the next batch comes, and the
	// connection is used again.
	_, _ = io.Copy(io.Discard, io.LimitReader(br, maxBulkAnswer))
}

// post sends batch as one _bulk request to the node rt names, as the
// client's request (path, query, credentials, content type), marked
// forwarded.
func (f *bulkForwarder) post(ctx context.Context, rt Route, batch []*fwdLine) (*http.Response, error) {
	r := f.r
	u := url.URL{Scheme: "http", Host: rt.Addr, Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: r.URL.RawQuery}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), &linesReader{lines: batch})
	if err != nil {
		return nil, err
	}
	size := int64(0)
	for _, fl := range batch {
		size += int64(len(fl.raw)) + 1
	}
	req.ContentLength = size
	// The transport sends the body again on a kept connection the node
	// had closed before a byte of it was written.
	req.GetBody = func() (io.ReadCloser, error) { return &linesReader{lines: batch}, nil }
	for _, h := range []string{"Authorization", "Content-Type"} {
		if v := r.Header.Get(h); v != "" {
			req.Header.Set(h, v)
		}
	}
	from := rt.From
	if from == "" {
		from = "?"
	}
	req.Header.Set(ForwardedHeader, from)
	f.s.setUsersVersion(req.Header)
	return f.s.fwd.RoundTrip(req)
}

// linesReader reads a batch's lines, each followed by "\n", from the
// lines themselves (no copy of the batch is made).
type linesReader struct {
	lines []*fwdLine
	i     int // the line being read
	off   int // how much of it is read; len(raw): its "\n" is next
}

func (r *linesReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) && r.i < len(r.lines) {
		raw := r.lines[r.i].raw
		if r.off < len(raw) {
			c := copy(p[n:], raw[r.off:])
			n += c
			r.off += c
			continue
		}
		p[n] = '\n'
		n++
		r.i, r.off = r.i+1, 0
	}
	if n == 0 && r.i >= len(r.lines) {
		return 0, io.EOF
	}
	return n, nil
}

// Close closes nothing: the lines belong to their requests' tasks.
func (r *linesReader) Close() error { return nil }
