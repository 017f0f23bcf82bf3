package chaostest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// opTimeout bounds one operation: past it the outcome is unknown.
const opTimeout = 10 * time.Second

// errRefused is an operation that was not applied: it never reached a
// server (the node is down), or the server refused it as "not my vbucket",
// which engine.ErrNotMyVBucket promises wrote nothing (no leader known,
// the group not running here, a forwarded request refused). It is left
// out of the history; were the promise broken, a later read of its value
// would make the history illegal.
var errRefused = errors.New("refused")

// errBadAnswer is an answer the harness does not expect (a 400, a
// malformed reply): a harness or server bug, failing the test.
var errBadAnswer = errors.New("unexpected answer")

// errWarmingUp is a view query a node just restarted answered 503 "warming
// up": its indexes not open yet, the client told to retry.
var errWarmingUp = errors.New("warming up")

// doHTTP runs one operation through node n's HTTP port. It returns the
// outcome, the value a get read and, for a get, the version's CAS.
func doHTTP(ctx context.Context, cl *http.Client, n *node, in input) (output, uint64, error) {
	method, path, body := http.MethodGet, "/default/docs/"+in.key, ""
	switch in.kind {
	case opSet:
		method, body = http.MethodPut, in.value
		if strings.HasSuffix(in.value, `"e":1}`) {
			path += "?expiry=3600" // long: nothing expires during the test
		}
	case opCAS:
		method, body = http.MethodPut, in.value
		path += "?op=replace&cas=" + strconv.FormatUint(in.cas, 10)
	case opDelete:
		method = http.MethodDelete
	}
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, "http://"+n.http+path, strings.NewReader(body))
	if err != nil {
		return output{}, 0, err
	}
	req.SetBasicAuth("Administrator", adminPassword)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := cl.Do(req)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return output{}, 0, errRefused
		}
		return output{kind: outUnknown, why: "http: " + errClass(err)}, 0, nil
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return output{kind: outUnknown, why: "http: reading the answer: " + errClass(err)}, 0, nil
	}
	switch {
	case resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusCreated:
		if in.kind == opGet {
			cas, _ := strconv.ParseUint(resp.Header.Get("X-Mayfly-Cas"), 10, 64)
			return output{kind: outOK, value: string(b)}, cas, nil
		}
		return output{kind: outOK, routedTo: resp.Header.Get("X-Mayfly-Routed-To")}, 0, nil
	case resp.StatusCode == http.StatusNotFound && (in.kind != opSet):
		return output{kind: outNotFound}, 0, nil
	case resp.StatusCode == http.StatusConflict && in.kind == opCAS && strings.Contains(string(b), "cas_mismatch"):
		return output{kind: outMismatch}, 0, nil
	case resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(string(b), "not my vbucket"),
		resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(string(b), "nothing was applied"):
		return output{}, 0, errRefused
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusRequestTimeout:
		return output{kind: outUnknown, why: fmt.Sprintf("http: %d %s", resp.StatusCode, errCode(b))}, 0, nil
	}
	return output{}, 0, fmt.Errorf("%w: %s %s on %s: %d %s", errBadAnswer, method, path, n.name, resp.StatusCode, b)
}

// doMemcached runs one operation through node n's memcached port, one
// connection per operation.
func doMemcached(ctx context.Context, n *node, in input) (output, uint64, error) {
	var cmd string
	switch in.kind {
	case opGet:
		cmd = "gets " + in.key + "\r\n"
	case opSet:
		exp := 0
		if strings.HasSuffix(in.value, `"e":1}`) {
			exp = 3600
		}
		cmd = fmt.Sprintf("set %s 0 %d %d\r\n%s\r\n", in.key, exp, len(in.value), in.value)
	case opCAS:
		cmd = fmt.Sprintf("cas %s 0 0 %d %d\r\n%s\r\n", in.key, len(in.value), in.cas, in.value)
	case opDelete:
		cmd = "delete " + in.key + "\r\n"
	}
	d := net.Dialer{Timeout: opTimeout}
	c, err := d.DialContext(ctx, "tcp", n.mc)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return output{}, 0, errRefused
		}
		return output{kind: outUnknown, why: "memcached: " + errClass(err)}, 0, nil
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(opTimeout)) // wall clock: a socket deadline
	if _, err := io.WriteString(c, cmd); err != nil {
		return output{kind: outUnknown, why: "memcached: " + errClass(err)}, 0, nil
	}
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		return output{kind: outUnknown, why: "memcached: " + errClass(err)}, 0, nil
	}
	line = strings.TrimSpace(line)
	switch {
	case strings.HasPrefix(line, "SERVER_ERROR not my vbucket"),
		strings.HasPrefix(line, "SERVER_ERROR") && strings.HasSuffix(line, "(nothing was applied)"):
		// A forward that could not reach the leader sent nothing.
		return output{}, 0, errRefused
	case strings.HasPrefix(line, "SERVER_ERROR"):
		return output{kind: outUnknown, why: "memcached: " + line}, 0, nil
	case in.kind == opGet && line == "END":
		return output{kind: outNotFound}, 0, nil
	case in.kind == opGet && strings.HasPrefix(line, "VALUE "):
		f := strings.Fields(line)
		if len(f) != 5 {
			break
		}
		size, err1 := strconv.Atoi(f[3])
		cas, err2 := strconv.ParseUint(f[4], 10, 64)
		if err1 != nil || err2 != nil {
			break
		}
		buf := make([]byte, size+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return output{kind: outUnknown, why: "memcached: " + errClass(err)}, 0, nil
		}
		return output{kind: outOK, value: string(buf[:size])}, cas, nil
	case line == "STORED" || line == "DELETED":
		return output{kind: outOK}, 0, nil
	case line == "NOT_FOUND" && in.kind != opSet:
		return output{kind: outNotFound}, 0, nil
	case line == "EXISTS" && in.kind == opCAS:
		return output{kind: outMismatch}, 0, nil
	}
	return output{}, 0, fmt.Errorf("%w: memcached %q on %s: %q", errBadAnswer, cmd, n.name, line)
}

// valueOf is a unique value: client c's n-th write, e marks one written
// with an expiry.
func valueOf(c, n int, expiry bool) string {
	e := 0
	if expiry {
		e = 1
	}
	v, _ := json.Marshal(struct{ C, N, E int }{c, n, e})
	return strings.ToLower(string(v))
}

// errClass names a transport error's kind for the unknown outcomes' tally.
func errClass(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed"
	}
	return "error"
}

// errCode is an HTTP error answer's "error" and "reason" fields, the
// reason cut short.
func errCode(body []byte) string {
	var e struct {
		Error  string `json:"error"`
		Reason string `json:"reason"`
	}
	json.Unmarshal(body, &e)
	if len(e.Reason) > 48 {
		e.Reason = e.Reason[:48] + "…"
	}
	return e.Error + " " + e.Reason
}

// call sends one administrator's request to node n's HTTP port and returns
// the status and body; a refused connection is errRefused, any other
// transport error is returned as it is.
func call(ctx context.Context, cl *http.Client, n *node, method, path, contentType, body string, timeout time.Duration) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, "http://"+n.http+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.SetBasicAuth("Administrator", adminPassword)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := cl.Do(req)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return 0, nil, errRefused
		}
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// putUntilAcked writes path (a document, with its query string) through
// random serving nodes until one acknowledges it: an unknown outcome is
// written again (the same value), a refusal tried elsewhere. It gives up
// when ctx ends or after a minute. It returns the attempts that were not
// acknowledged, described.
func (r *run) putUntilAcked(ctx context.Context, rng *rand.Rand, path, value string) ([]string, error) {
	deadline := time.Now().Add(time.Minute) // wall clock: a hang guard
	var last error
	var tries []string
	for ctx.Err() == nil && time.Now().Before(deadline) { // wall clock: a hang guard
		up := r.upNodes()
		if len(up) == 0 {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		n := up[rng.IntN(len(up))]
		code, b, err := call(ctx, r.cl, n, http.MethodPut, path, "application/json", value, opTimeout)
		switch {
		case err == nil && (code == http.StatusOK || code == http.StatusCreated):
			return tries, nil
		case err == nil && code < 500 && code != http.StatusRequestTimeout && !strings.Contains(string(b), "not my vbucket"):
			return tries, fmt.Errorf("%w: PUT %s on %s: %d %s", errBadAnswer, path, n.name, code, b)
		case err != nil:
			last = err
		default:
			last = fmt.Errorf("%d %s", code, errCode(b))
		}
		tries = append(tries, fmt.Sprintf("%.3fs %s: %v", float64(r.now())/1e9, n.name, last))
		time.Sleep(20 * time.Millisecond)
	}
	return tries, fmt.Errorf("PUT %s acknowledged by no node: %v", path, last)
}

// getSettled reads path through node n once every node serves: a refusal
// or a 5xx (a node that just served again refuses the partitions whose
// groups are not running yet) is asked again, for up to 10 s.
func (r *run) getSettled(ctx context.Context, n *node, path string) (int, []byte, error) {
	for try := 0; ; try++ {
		code, b, err := call(ctx, r.cl, n, http.MethodGet, path, "", "", opTimeout)
		if (errors.Is(err, errRefused) || err == nil && code >= 500) && try < 100 {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		return code, b, err
	}
}
