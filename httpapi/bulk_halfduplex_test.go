package httpapi_test

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestBulkAnswersClientThatSendsWholeBodyFirst: many HTTP clients (Python's
// requests, Java's HttpURLConnection) send the whole request body before
// they read a byte of the answer. _bulk answers every line of such a
// client: the server keeps reading the body however many answers are
// waiting to be read, and the client then reads them all. A review found
// that it did not: the answers, streamed as the lines ran, filled the
// connection's buffers, the server stopped reading the body, and the
// client's write blocked until a timeout ended the request, leaving part
// of the lines applied and none of the answers read (Python's requests,
// 400,000 small upserts: 65,163 applied, then "timed out").
//
// Each line here deletes a missing 250-byte key: its answer echoes the key
// twice (id and reason), so the answers are about twice the body, well over
// what loopback sockets buffer, and no line writes anything.
func TestBulkAnswersClientThatSendsWholeBodyFirst(t *testing.T) {
	f := newFixture(t)
	const n = 80000
	var b strings.Builder
	for i := range n {
		key := fmt.Sprintf("%07d", i) + strings.Repeat("k", 243)
		b.WriteString(`{"op":"delete","id":"` + key + `"}` + "\n")
	}
	body := b.String()
	host := strings.TrimPrefix(f.srv.URL, "http://")
	conn, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	auth := base64.StdEncoding.EncodeToString([]byte(adminUser + ":" + adminPass))
	head := fmt.Sprintf("POST /default/_bulk HTTP/1.1\r\nHost: %s\r\nAuthorization: Basic %s\r\nContent-Type: application/x-ndjson\r\nContent-Length: %d\r\n\r\n", host, auth, len(body))
	if _, err := conn.Write([]byte(head)); err != nil {
		t.Fatal(err)
	}
	// The whole body first, as such a client sends it. A chunk the server
	// takes nothing of for 30 s means it stopped reading.
	const chunk = 64 << 10
	for off := 0; off < len(body); off += chunk {
		if err := conn.SetWriteDeadline(time.Now().Add(30 * time.Second)); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Write([]byte(body[off:min(off+chunk, len(body))])); err != nil {
			t.Fatalf("the server stopped reading the body after %d of %d bytes (its answers unread): %v", off, len(body), err)
		}
	}
	if err := conn.SetReadDeadline(time.Now().Add(2 * time.Minute)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	got := 0
	for sc.Scan() {
		if !strings.Contains(sc.Text(), `"error":"not_found"`) {
			t.Fatalf("answer line %d: %.300s", got+1, sc.Text())
		}
		got++
	}
	if err := sc.Err(); err != nil || got != n {
		t.Fatalf("%d answer lines of %d: %v", got, n, err)
	}
}
