package main

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestRawClientReadsAnswers: the range phase's raw client reads answers of
// both shapes net/http writes (a length, or chunks once the answer outgrows
// its buffer) on one kept-alive connection, reports a status other than
// 200 with its body, and reads without allocating once its buffers have
// grown (the generator's collections would take CPU from the server).
func TestRawClientReadsAnswers(t *testing.T) {
	big := strings.Repeat(`{"id":"x"},`, 2000) // over net/http's buffer: chunked
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/small":
			w.Write([]byte(`{"id":"s"}`))
		case "/big":
			w.Write([]byte(big[:len(big)/2]))
			w.(http.Flusher).Flush()
			w.Write([]byte(big[len(big)/2:]))
		default:
			http.Error(w, "no such view", http.StatusNotFound)
		}
	}))
	defer srv.Close()
	c := &rawClient{addr: strings.TrimPrefix(srv.URL, "http://")}
	defer c.close()
	for range 3 {
		if b, err := c.get([]byte("/small")); err != nil || string(b) != `{"id":"s"}` {
			t.Fatalf("small: %q, %v", b, err)
		}
		if b, err := c.get([]byte("/big")); err != nil || string(b) != big {
			t.Fatalf("big: %d bytes, %v", len(b), err)
		}
	}
	if _, err := c.get([]byte("/missing")); err == nil || !strings.Contains(err.Error(), "404") || !strings.Contains(err.Error(), "no such view") {
		t.Fatalf("missing: %v", err)
	}
	if b, err := c.get([]byte("/small")); err != nil || string(b) != `{"id":"s"}` {
		t.Fatalf("after a 404: %q, %v", b, err)
	}
}

// TestRawClientReadsWithoutAllocating: once its buffers have grown, the
// raw client reads an answer without allocating (the server is left out:
// a reader repeats one chunked answer).
func TestRawClientReadsWithoutAllocating(t *testing.T) {
	answer := []byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" +
		"800\r\n" + strings.Repeat("a", 0x800) + "\r\n1a;x=y\r\n" + strings.Repeat("b", 0x1a) + "\r\n0\r\n\r\n")
	c := &rawClient{br: bufio.NewReader(&repeater{b: answer})}
	read := func() {
		status, err := c.readResponse()
		if err != nil || status != 200 || len(c.body) != 0x800+0x1a || c.body[len(c.body)-1] != 'b' {
			t.Fatalf("status %d, %d bytes, %v", status, len(c.body), err)
		}
	}
	read()
	if n := testing.AllocsPerRun(50, read); n > 0 {
		t.Fatalf("%.1f allocations an answer", n)
	}
}

// repeater reads b over and over.
type repeater struct {
	b  []byte
	at int
}

func (r *repeater) Read(p []byte) (int, error) {
	n := copy(p, r.b[r.at:])
	r.at = (r.at + n) % len(r.b)
	return n, nil
}
