package chaostest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"
)

// expiryCase writes, beside the register load and across the kills,
// documents that expire 2–6 s later (wall clock: these are real
// processes), each id written until a node acknowledges it and never
// again, never read; and long-lived typed documents for the view. The
// harness itself runs every serving node's expiry pager about every second
// (POST …/controller/runExpiryPager, which answers how many documents that
// run purged: the bucket's scheduled pager, every 3600 s by default, does
// not run within the test) on the chaos loop's goroutine, so no run is in
// flight when a node is killed and every purge is counted from an answer.
//
// At the end, with no writes: a last batch expires unpurged, and a view
// query with expired=exclude (and stale=false) answers identically from
// every node, rows and total_rows, as the model of the long-lived
// documents; then the pagers run until a round purges nothing, and the
// purges summed over every run on every node equal the number of
// expiring ids exactly: each expired document purged once (a second
// purge of one, say by a new leader replaying or a restarted node's
// pager, would make it more; one never purged, less). Exactness needs
// every pager call answered: a call that failed otherwise than refused is
// counted and turns the equality into a bound, said so in the log.
// Finally every expiring id reads as missing through every node.
type expiryCase struct {
	base
	mu        sync.Mutex
	expiring  []string  // ids written with a short expiry, acknowledged
	lastDue   time.Time // when the last of them expires
	longLived []typedDoc
	retried   map[string]string // ids written more than once: the attempts
	purged    int               // summed over every pager run answered
	runs      int               // pager runs answered
	failed    []string
	writerErr error
}

func (c *expiryCase) setup(ctx context.Context, r *run) error {
	c.retried = map[string]string{}
	return r.putDesignDoc(ctx)
}

func (c *expiryCase) load(ctx context.Context, r *run, wg *sync.WaitGroup) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(7, uint64(r.t0.UnixNano())))
		for i := 0; ctx.Err() == nil; i++ {
			time.Sleep(100 * time.Millisecond)
			if i%10 == 9 {
				d := typedDoc{id: fmt.Sprintf("l%04d", i), typ: "l", n: rng.IntN(10)}
				if _, err := r.putUntilAcked(ctx, rng, "/default/docs/"+d.id, fmt.Sprintf(`{"type":"l","n":%d}`, d.n)); err != nil {
					if ctx.Err() == nil {
						c.writerErr = err
					}
					return
				}
				c.mu.Lock()
				c.longLived = append(c.longLived, d)
				c.mu.Unlock()
				continue
			}
			if err := c.writeExpiring(ctx, r, rng, fmt.Sprintf("x%04d", i), 2+rng.IntN(5)); err != nil {
				if ctx.Err() == nil {
					c.writerErr = err
				}
				return
			}
		}
	}()
}

// writeExpiring writes id with an expiry of secs seconds until a node
// acknowledges it, and records it. An id whose writes were not all
// acknowledged is recorded too when the writer is cancelled: it may
// exist.
func (c *expiryCase) writeExpiring(ctx context.Context, r *run, rng *rand.Rand, id string, secs int) error {
	path := fmt.Sprintf("/default/docs/%s?expiry=%d", id, secs)
	tries, err := r.putUntilAcked(ctx, rng, path, `{"type":"x","n":1}`)
	if err != nil && ctx.Err() != nil {
		// Cancelled between attempts: write it again, now that the load
		// is over, so that it surely exists (and expires) once.
		var more []string
		more, err = r.putUntilAcked(context.Background(), rng, path, `{"type":"x","n":1}`)
		tries = append(append(tries, "(the load ended)"), more...)
	}
	if err != nil {
		return err
	}
	c.mu.Lock()
	if len(tries) > 0 {
		c.retried[id] = fmt.Sprintf("%s, acknowledged at %.3fs after %s", path, float64(r.now())/1e9, strings.Join(tries, "; "))
	}
	c.expiring = append(c.expiring, id)
	if due := time.Now().Add(time.Duration(secs) * time.Second); due.After(c.lastDue) { // wall clock: the servers expire by theirs
		c.lastDue = due
	}
	c.mu.Unlock()
	return nil
}

// tick runs the expiry pager on every serving node.
func (c *expiryCase) tick(ctx context.Context, r *run) {
	c.runPagers(ctx, r)
}

// runPagers runs the expiry pager on every serving node once and returns
// what they purged.
func (c *expiryCase) runPagers(ctx context.Context, r *run) int {
	sum := 0
	for _, n := range r.upNodes() {
		code, b, err := call(ctx, r.cl, n, http.MethodPost, "/pools/default/buckets/default/controller/runExpiryPager", "", "", time.Minute)
		if errors.Is(err, errRefused) {
			continue // not started: nothing ran
		}
		var res struct {
			Purged *int `json:"purged"`
		}
		if err == nil && code == http.StatusOK {
			err = json.Unmarshal(b, &res)
		}
		if err != nil || code != http.StatusOK || res.Purged == nil {
			c.failed = append(c.failed, fmt.Sprintf("%.1fs %s: %d %s %v", float64(r.now())/1e9, n.name, code, b, err))
			continue
		}
		c.runs++
		sum += *res.Purged
	}
	c.purged += sum
	return sum
}

func (c *expiryCase) check(ctx context.Context, r *run) {
	t := r.t
	if c.writerErr != nil {
		t.Fatalf("expiry writer: %v", c.writerErr)
	}
	// The last batch, written with no kill and no other write, expires
	// before the view is asked and is not purged yet then.
	rng := rand.New(rand.NewPCG(8, 8))
	for i := range 30 {
		if err := c.writeExpiring(ctx, r, rng, fmt.Sprintf("f%04d", i), 2); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Until(c.lastDue) + 1500*time.Millisecond) // wall clock: past every expiry, by the servers' clocks
	m := newViewModel(c.longLived)
	diffs, err := r.compareViews(ctx, m, "&expired=exclude")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range diffs {
		t.Errorf("expired=exclude: %s", d)
	}
	if len(diffs) == 0 {
		t.Logf("expiry: with expired=exclude every node answers %d view queries as the model of the %d long-lived documents (the last batch's %d expired, not yet purged)",
			len(m.queries()), len(c.longLived), 30)
	}
	// Purge until a round purges nothing.
	for round := 0; ; round++ {
		if c.runPagers(ctx, r) == 0 {
			break
		}
		if round == 100 {
			t.Fatalf("the pagers still purge after 100 rounds")
		}
	}
	t.Logf("expiry: %d ids written with a 2–6 s expiry (%d in the last batch), %d purged by %d pager runs; %d calls not answered",
		len(c.expiring), 30, c.purged, c.runs, len(c.failed))
	switch {
	case len(c.failed) == 0 && c.purged != len(c.expiring):
		t.Errorf("the pagers purged %d documents, %d expired: each expired document must be purged once", c.purged, len(c.expiring))
	case len(c.failed) > 0:
		for _, f := range c.failed {
			t.Logf("a pager call not answered (its purges not counted): %s", f)
		}
		if c.purged > len(c.expiring) {
			t.Errorf("the pagers purged %d documents, only %d expired", c.purged, len(c.expiring))
		}
	}
	for _, id := range c.expiring {
		for _, n := range r.nodes {
			code, b, err := r.getSettled(ctx, n, "/default/docs/"+id+"?meta=true")
			if err != nil || code != http.StatusNotFound {
				t.Errorf("%s reads expired %s: %d %s %v (written: %s)", n.name, id, code, b, err, c.retried[id])
			}
		}
	}
}
