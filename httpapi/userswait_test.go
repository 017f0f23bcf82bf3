package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/httpapi"
)

// laggingUsers is a cluster node's UserStore whose users never come past
// version: each WaitVersion for a later one waits until release closes
// (or its ctx ends), or, with timeOut, ends at once as a wait that ran out.
type laggingUsers struct {
	version  atomic.Int64
	release  chan struct{}
	timeOut  bool
	asked    atomic.Int64 // WaitVersion calls
	waiting  atomic.Int64 // WaitVersion calls not returned
	mostWait atomic.Int64 // the most calls waiting at once
}

func (l *laggingUsers) PutUser(context.Context, string, string, string, []auth.Role) error {
	return nil
}

func (l *laggingUsers) DeleteUser(context.Context, string) error { return nil }

func (l *laggingUsers) Version() int64 { return l.version.Load() }

func (l *laggingUsers) WaitVersion(ctx context.Context, v int64) error {
	l.asked.Add(1)
	if l.timeOut {
		return fmt.Errorf("waiting for the users at %d: %w", v, context.DeadlineExceeded)
	}
	n := l.waiting.Add(1)
	defer l.waiting.Add(-1)
	for {
		m := l.mostWait.Load()
		if n <= m || l.mostWait.CompareAndSwap(m, n) {
			break
		}
	}
	select {
	case <-l.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// getWith sends GET path as the administrator with the headers given,
// and returns the status (0 and the error when it failed).
func getWith(url string, headers map[string]string) (int, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	req.SetBasicAuth(adminUser, adminPass)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// TestUsersVersionHeaderHoldsNoMoreThanItShould: X-Mayfly-Users-Version
// makes a request wait for this node's users only when another node sent
// it, only so many at once, and not again while the node's users are
// stuck where a wait ran out. Before, any client could send the header
// (a version the cluster never reached) and have each of its requests
// wait 5 s unauthenticated, as many at once as it opened connections;
// and a node whose users lagged (cut off from etcd) made every forwarded
// request pay the whole 5 s.
func TestUsersVersionHeaderHoldsNoMoreThanItShould(t *testing.T) {
	lu := &laggingUsers{release: make(chan struct{})}
	lu.version.Store(3)
	f := newFixtureOpts(t, &httpapi.Options{Users: lu}, nil)
	url := f.srv.URL + "/pools/default/buckets"
	far := map[string]string{httpapi.UsersVersionHeader: "999999"}

	// A client's own header: no wait.
	if code, err := getWith(url, far); code != http.StatusOK {
		t.Fatalf("a client's request with the header: %d %v", code, err)
	}
	if n := lu.asked.Load(); n != 0 {
		t.Errorf("a client's request (not marked as a node's) waited for the users %d times; want none", n)
	}

	// Forwarded requests: at most so many wait at once; the others are
	// authenticated at once (and answered).
	const requests = 200
	fwd := map[string]string{httpapi.UsersVersionHeader: "999999", httpapi.ForwardedHeader: "n2"}
	var answered atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, requests)
	for range requests {
		wg.Go(func() {
			code, err := getWith(url, fwd)
			if code != http.StatusOK {
				errs <- fmt.Errorf("a forwarded request: %d %v", code, err)
			}
			answered.Add(1)
		})
	}
	deadline := time.Now().Add(time.Minute) // wall clock: a hang guard only
	for answered.Load()+lu.waiting.Load() < requests && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	most := lu.mostWait.Load()
	close(lu.release)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if most == 0 || most > 128 {
		t.Errorf("%d of %d forwarded requests waited for the users at once; want some, at most 128", most, requests)
	}

	// A wait that ran out: the next forwarded request does not wait
	// again until the node's users move.
	lu2 := &laggingUsers{timeOut: true}
	lu2.version.Store(3)
	g := newFixtureOpts(t, &httpapi.Options{Users: lu2}, nil)
	url = g.srv.URL + "/pools/default/buckets"
	for i := range 3 {
		if code, err := getWith(url, fwd); code != http.StatusOK {
			t.Fatalf("forwarded request %d: %d %v", i, code, err)
		}
	}
	if n := lu2.asked.Load(); n != 1 {
		t.Errorf("3 forwarded requests while the users were stuck waited %d times; want 1 (the first)", n)
	}
	lu2.version.Store(4)
	if code, err := getWith(url, fwd); code != http.StatusOK {
		t.Fatalf("forwarded request once the users moved: %d %v", code, err)
	}
	if n := lu2.asked.Load(); n != 2 {
		t.Errorf("a forwarded request once the users moved: waits %d; want 2 (it waits again)", n)
	}
}
