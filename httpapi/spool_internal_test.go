package httpapi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"
)

// TestSpoolKeepsOrderThroughItsFile: everything a producer writes reaches
// the client in order, through memory and the temporary file, while the
// client reads nothing until the producer is done; past the file's bound
// the producer waits for the client.
func TestSpoolKeepsOrderThroughItsFile(t *testing.T) {
	sp := newSpool(100, 10_000)
	var want bytes.Buffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 500 { // ~5 KB: past memory, within the file's bound
			line := fmt.Sprintf("line %d\n", i)
			want.WriteString(line)
			if _, err := sp.Write([]byte(line)); err != nil {
				t.Error(err)
				return
			}
		}
		sp.Close()
	}()
	select {
	case <-done: // the producer never waited for a reader
	case <-time.After(time.Minute):
		t.Fatal("the producer waited for a client that reads nothing, within the spool's bounds")
	}
	var got bytes.Buffer
	sp.drain(&got, func() error { return nil })
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Fatalf("the client read %d bytes, not the %d written in order", got.Len(), want.Len())
	}

	// Past the file's bound the producer waits, and goes on as the client reads.
	sp = newSpool(10, 100)
	wrote := make(chan int, 1)
	go func() {
		n := 0
		for range 50 {
			k, err := sp.Write([]byte("0123456789"))
			if err != nil {
				break
			}
			n += k
		}
		sp.Close()
		wrote <- n
	}()
	got.Reset()
	sp.drain(&got, func() error { return nil })
	if n := <-wrote; n != 500 || got.Len() != 500 {
		t.Fatalf("wrote %d, read %d; want 500 each", n, got.Len())
	}
}

// TestSpoolRefusesWritesOnceTheClientIsGone: a failed write to the client
// ends the drain, and the producer's writes fail from then on rather than
// pile up.
func TestSpoolRefusesWritesOnceTheClientIsGone(t *testing.T) {
	sp := newSpool(10, 100)
	gone := errors.New("client gone")
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		sp.drain(failingWriter{gone}, func() error { return nil })
	}()
	var err error
	for range 1000 {
		if _, err = sp.Write([]byte("0123456789")); err != nil {
			break
		}
	}
	<-drained
	if !errors.Is(err, errSpoolDrain) || !errors.Is(err, gone) {
		t.Fatalf("write after the client went: %v", err)
	}
}

type failingWriter struct{ err error }

func (w failingWriter) Write([]byte) (int, error) { return 0, w.err }

var _ io.Writer = failingWriter{}
