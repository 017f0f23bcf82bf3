package httpapi

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net"
	"strconv"
	"strings"
)

// JSONErrors wraps a listener so the few answers Go's net/http server writes
// by itself, straight onto the connection and in plain text, come out as JSON
// like every other error: a malformed request (400), headers over the limit
// (431), an unsupported transfer encoding (501), and (when ln is a TLS
// listener) plain HTTP sent to the HTTPS port (400).
//
// It recognises them by their exact shape: one Write that begins with a
// status line followed at once by "Content-Type: text/plain;
// charset=utf-8\r\nConnection: close\r\n\r\n" (responses from handlers always
// carry a Date header and sort Connection first), or Go's fixed
// "Client sent an HTTP request to an HTTPS server." answer. Anything else
// passes through untouched.
func JSONErrors(ln net.Listener) net.Listener { return jsonErrListener{ln} }

type jsonErrListener struct{ net.Listener }

func (l jsonErrListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &jsonErrConn{Conn: c}, nil
}

type jsonErrConn struct{ net.Conn }

const (
	goErrorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"
	goHTTPSError   = "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n"
)

// Read passes reads through. Under TLS (this wrapper hides *tls.Conn from
// net/http, which therefore does not run its own handshake check), a client
// speaking plain HTTP to the HTTPS port gets a JSON 400 on the raw
// connection, as net/http would have answered in plain text.
func (c *jsonErrConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err != nil {
		if re, ok := errors.AsType[tls.RecordHeaderError](err); ok && re.Conn != nil && looksLikeHTTP(re.RecordHeader[:]) {
			re.Conn.Write(jsonAnswer("HTTP/1.0", 400, "Bad Request", "bad_request", "this port speaks HTTPS; the client sent plain HTTP"))
			re.Conn.Close()
		}
	}
	return n, err
}

func looksLikeHTTP(hdr []byte) bool {
	for _, m := range []string{"GET /", "HEAD ", "POST ", "PUT /", "OPTIO", "DELET", "PATCH", "CONNE"} {
		if string(hdr) == m {
			return true
		}
	}
	return false
}

func (c *jsonErrConn) Write(b []byte) (int, error) {
	if out := rewriteGoError(b); out != nil {
		if _, err := c.Conn.Write(out); err != nil {
			return 0, err
		}
		return len(b), nil
	}
	return c.Conn.Write(b)
}

// rewriteGoError returns b as a JSON answer if it is one of net/http's own
// plain-text errors, else nil.
func rewriteGoError(b []byte) []byte {
	if bytes.Equal(b, []byte(goHTTPSError)) {
		return jsonAnswer("HTTP/1.0", 400, "Bad Request", "bad_request", "this port speaks HTTPS; the client sent plain HTTP")
	}
	if !bytes.HasPrefix(b, []byte("HTTP/1.1 ")) {
		return nil
	}
	i := bytes.Index(b, []byte(goErrorHeaders))
	if i < 0 || bytes.IndexByte(b[:i], '\n') >= 0 || bytes.IndexByte(b[:i], '\r') >= 0 {
		return nil
	}
	status := string(b[len("HTTP/1.1 "):i]) // "400 Bad Request" or "400 Bad Request: reason"
	codeText, _, _ := strings.Cut(status, " ")
	code, err := strconv.Atoi(codeText)
	if err != nil || code < 400 || code > 599 {
		return nil
	}
	text := strings.TrimPrefix(status, codeText+" ")
	phrase, reason, hasReason := strings.Cut(text, ": ")
	if !hasReason {
		reason = strings.ToLower(phrase)
	}
	name := map[int]string{400: "bad_request", 431: "header_too_large", 501: "not_implemented"}[code]
	if name == "" {
		name = strings.ReplaceAll(strings.ToLower(phrase), " ", "_")
	}
	return jsonAnswer("HTTP/1.1", code, phrase, name, reason)
}

func jsonAnswer(proto string, code int, phrase, name, reason string) []byte {
	body, _ := json.Marshal(map[string]string{"error": name, "reason": reason})
	body = append(body, '\n')
	var out bytes.Buffer
	out.WriteString(proto + " " + strconv.Itoa(code) + " " + phrase + "\r\n")
	out.WriteString("Connection: close\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n")
	out.Write(body)
	return out.Bytes()
}
