package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// mcConn is one connection to the memcached text port.
type mcConn struct {
	c net.Conn
	r *bufio.Reader
	w *bufio.Writer
}

func dialMC(addr string) (*mcConn, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	return &mcConn{c: c, r: bufio.NewReaderSize(c, 64<<10), w: bufio.NewWriterSize(c, 64<<10)}, nil
}

func (m *mcConn) Close() error { return m.c.Close() }

// line reads one reply line without its CRLF.
func (m *mcConn) line() (string, error) {
	s, err := m.r.ReadString('\n')
	return strings.TrimRight(s, "\r\n"), err
}

// get reads key's value; a miss is an error.
func (m *mcConn) get(key string) ([]byte, error) {
	m.c.SetDeadline(time.Now().Add(time.Minute)) // wall clock: the benchmark times a real server
	fmt.Fprintf(m.w, "get %s\r\n", key)
	if err := m.w.Flush(); err != nil {
		return nil, err
	}
	l, err := m.line()
	if err != nil {
		return nil, err
	}
	f := strings.Fields(l)
	if len(f) != 4 || f[0] != "VALUE" {
		return nil, fmt.Errorf("get %s: %q", key, l)
	}
	n, err := strconv.Atoi(f[3])
	if err != nil {
		return nil, err
	}
	buf := make([]byte, n+2)
	if _, err := io.ReadFull(m.r, buf); err != nil {
		return nil, err
	}
	if l, err := m.line(); err != nil || l != "END" {
		return nil, fmt.Errorf("get %s: after the value %q %v", key, l, err)
	}
	return buf[:n], nil
}

// stats runs "stats" and returns its lines as name → value.
func (m *mcConn) stats() (map[string]string, error) {
	m.c.SetDeadline(time.Now().Add(30 * time.Second)) // wall clock: the benchmark times a real server
	m.w.WriteString("stats\r\n")
	if err := m.w.Flush(); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for {
		l, err := m.line()
		if err != nil {
			return nil, err
		}
		if l == "END" {
			return out, nil
		}
		f := strings.SplitN(l, " ", 3)
		if len(f) != 3 || f[0] != "STAT" {
			return nil, fmt.Errorf("stats: %q", l)
		}
		out[f[1]] = f[2]
	}
}

// errRefused is a set the server answered with an error (SERVER_ERROR ...).
var errRefused = errors.New("set refused")

// setBatch sends one set per key, then reads every reply (pipelining).
// It returns the keys the server refused, to be sent again.
func (m *mcConn) setBatch(keys []int, key func(int) string, value func(int, []byte) []byte, scratch []byte) ([]int, error) {
	m.c.SetDeadline(time.Now().Add(5 * time.Minute)) // wall clock: the benchmark times a real server
	for _, i := range keys {
		v := value(i, scratch[:0])
		fmt.Fprintf(m.w, "set %s 0 0 %d\r\n", key(i), len(v))
		m.w.Write(v)
		m.w.WriteString("\r\n")
	}
	if err := m.w.Flush(); err != nil {
		return nil, err
	}
	var again []int
	for _, i := range keys {
		l, err := m.line()
		if err != nil {
			return nil, err
		}
		switch {
		case l == "STORED":
		case strings.HasPrefix(l, "SERVER_ERROR"):
			again = append(again, i)
		default:
			return nil, fmt.Errorf("set %s: %q", key(i), l)
		}
	}
	return again, nil
}

// load stores documents 0..n-1 over conns connections, each sending depth
// sets before reading their replies. A refused set is sent again after a
// pause; progress counts stored documents.
func load(ctx context.Context, addr string, n, conns, depth int, key func(int) string, value func(int, []byte) []byte, progress *atomic.Int64, refused *atomic.Int64) error {
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := dialMC(addr)
			if err != nil {
				errs <- err
				return
			}
			defer m.Close()
			scratch := make([]byte, 0, 64<<10)
			batch := make([]int, 0, depth)
			flush := func() error {
				for tries := 0; len(batch) > 0; tries++ {
					if ctx.Err() != nil {
						return ctx.Err()
					}
					again, err := m.setBatch(batch, key, value, scratch)
					if err != nil {
						return err
					}
					progress.Add(int64(len(batch) - len(again)))
					if len(again) > 0 {
						refused.Add(int64(len(again)))
						if tries > 6000 {
							return fmt.Errorf("%w: %d sets still refused after %d tries", errRefused, len(again), tries)
						}
						time.Sleep(10 * time.Millisecond)
					}
					batch = append(batch[:0], again...)
				}
				return nil
			}
			for i := c; i < n; i += conns {
				batch = append(batch, i)
				if len(batch) == depth {
					if err := flush(); err != nil {
						errs <- err
						return
					}
				}
			}
			if err := flush(); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}
