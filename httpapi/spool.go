package httpapi

import (
	"errors"
	"io"
	"os"
	"sync"
)

// A spool holds a streamed answer between its producer and the client, so
// that a client that reads the answer only after sending its whole request
// (Python's requests, Java's HttpURLConnection: half duplex) does not stop
// the server reading that request. _bulk answers each line as it runs;
// without a spool, its unread answers filled the connection's buffers, the
// server's writes blocked, it stopped reading the body, and both ends
// waited until a timeout. The producer writes into the spool, never
// blocking until it holds spoolFileMax; a drainer copies it to the client
// as fast as the client reads. The first spoolMemMax bytes wait in memory,
// the rest in an unlinked temporary file.
type spool struct {
	mu      sync.Mutex
	cond    sync.Cond
	mem     []byte   // waiting bytes, before the spool spilled to f
	f       *os.File // nil until spilled; then every waiting byte is in it
	rd, wr  int64    // f's read and write offsets
	closed  bool     // the producer is done
	failed  error    // the drainer failed (the client went): writes are refused
	memMax  int
	fileMax int64
}

// Spool bounds: memory first, then a temporary file, then the producer
// waits (a client that never reads an answer of over 256 MiB holds its
// request's reading, as without a spool).
const (
	spoolMemMax  = 1 << 20
	spoolFileMax = 256 << 20
	spoolChunk   = 64 << 10
)

// errSpoolDrain is a spool's write after its drainer failed.
var errSpoolDrain = errors.New("httpapi: the answer's client is gone")

func newSpool(memMax int, fileMax int64) *spool {
	s := &spool{memMax: memMax, fileMax: fileMax}
	s.cond.L = &s.mu
	return s
}

// Write queues p for the client. It waits only while the spool holds
// fileMax bytes; it fails once the drainer has.
func (s *spool) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.failed == nil && s.f != nil && s.wr-s.rd+int64(len(p)) > s.fileMax && s.wr > s.rd {
		s.cond.Wait()
	}
	if s.failed != nil {
		return 0, s.failed
	}
	if s.f == nil && len(s.mem)+len(p) <= s.memMax {
		s.mem = append(s.mem, p...)
		s.cond.Broadcast()
		return len(p), nil
	}
	if s.f == nil {
		f, err := os.CreateTemp("", "mayfly-answer-*")
		if err != nil {
			return 0, err
		}
		os.Remove(f.Name()) // unlinked: gone with its last descriptor
		s.f = f
		if _, err := f.WriteAt(s.mem, 0); err != nil {
			return 0, err
		}
		s.rd, s.wr, s.mem = 0, int64(len(s.mem)), nil
	}
	if _, err := s.f.WriteAt(p, s.wr); err != nil {
		return 0, err
	}
	s.wr += int64(len(p))
	s.cond.Broadcast()
	return len(p), nil
}

// Close says the producer is done: the drainer ends once it has sent
// everything.
func (s *spool) Close() {
	s.mu.Lock()
	s.closed = true
	s.cond.Broadcast()
	s.mu.Unlock()
}

// drain copies the spool to w, calling flush after each chunk, until the
// producer has closed it and everything is sent, or a write fails (the
// spool then refuses writes). It releases the temporary file.
func (s *spool) drain(w io.Writer, flush func() error) {
	buf := make([]byte, spoolChunk)
	defer func() {
		s.mu.Lock()
		if s.f != nil {
			s.f.Close()
		}
		s.mem = nil
		s.mu.Unlock()
	}()
	for {
		s.mu.Lock()
		for len(s.mem) == 0 && s.rd == s.wr && !s.closed {
			s.cond.Wait()
		}
		var chunk []byte
		switch {
		case len(s.mem) > 0:
			chunk, s.mem = s.mem, nil // the producer appends to a new slice
		case s.rd < s.wr:
			n, err := s.f.ReadAt(buf[:min(int64(len(buf)), s.wr-s.rd)], s.rd)
			if err != nil && !errors.Is(err, io.EOF) {
				s.failLocked(err)
				s.mu.Unlock()
				return
			}
			chunk = buf[:n]
			s.rd += int64(n)
			if s.rd == s.wr {
				// All sent: the file is used again from its start.
				s.rd, s.wr = 0, 0
				_ = s.f.Truncate(0)
			}
			s.cond.Broadcast() // a producer waiting for room
		default: // closed, and all sent
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		if _, err := w.Write(chunk); err != nil {
			s.fail(err)
			return
		}
		if err := flush(); err != nil {
			s.fail(err)
			return
		}
	}
}

// failLocked records the drainer's failure and wakes a waiting producer.
//
// REQUIRES: s.mu held.
func (s *spool) failLocked(err error) {
	if s.failed == nil {
		s.failed = errors.Join(errSpoolDrain, err)
	}
	s.cond.Broadcast()
}

// fail is failLocked for a caller not holding s.mu.
func (s *spool) fail(err error) {
	s.mu.Lock()
	s.failLocked(err)
	s.mu.Unlock()
}
