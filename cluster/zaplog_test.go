package cluster

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
)

func TestZapToSlogKeepsWarningsOnly(t *testing.T) {
	var buf bytes.Buffer
	var quiet atomic.Bool
	lg := zapToSlog(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})), &quiet)
	lg.Info("starting a member")
	lg.Named("raft").With(zap.String("member", "n1")).Warn("lost peer", zap.Int("tries", 3))
	lg.Error("disk failed")
	lg.Warn("simple token is not cryptographically signed")
	lg.Error("failed to update storage version", zap.Error(errors.New("cannot detect storage schema version: missing term information")))
	lg.Error("failed to update storage version", zap.Error(errors.New("disk gone")))
	quiet.Store(true)
	lg.Warn("closed connection")
	got := buf.String()
	for _, want := range []string{`level=WARN msg="etcd: lost peer" logger=raft member=n1 tries=3`, `level=ERROR msg="etcd: disk failed"`, `level=ERROR msg="etcd: failed to update storage version" error="disk gone"`} {
		if !strings.Contains(got, want) {
			t.Errorf("log lacks %q:\n%s", want, got)
		}
	}
	for _, not := range []string{"starting a member", "simple token", "missing term information", "closed connection"} {
		if strings.Contains(got, not) {
			t.Errorf("log at info level has %q:\n%s", not, got)
		}
	}
}

// stepClock is a zap clock moved by hand.
type stepClock struct{ now time.Time }

func (c *stepClock) Now() time.Time                         { return c.now }
func (c *stepClock) NewTicker(d time.Duration) *time.Ticker { return time.NewTicker(d) }

// TestZapToSlogSaysAnUnreachablePeerOnce: etcd's prober reports a peer
// that does not answer every 5 s on each of its two round trippers; the
// log says it once per peer at warn level, and once at info level when the
// peer is back, then again if it goes away again.
func TestZapToSlogSaysAnUnreachablePeerOnce(t *testing.T) {
	var buf bytes.Buffer
	clock := &stepClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	lg := zapToSlog(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})), nil).
		WithOptions(zap.WithClock(clock)).Named("rafthttp").With(zap.String("local-member-id", "m1"))
	probe := func(peer string) {
		for _, rt := range []string{"ROUND_TRIPPER_SNAPSHOT", "ROUND_TRIPPER_RAFT_MESSAGE"} {
			lg.Warn("prober detected unhealthy status", zap.String("round-tripper-name", rt),
				zap.String("remote-peer-id", peer), zap.Duration("rtt", 0), zap.Error(errors.New("connection refused")))
		}
	}
	count := func(s string) int { return strings.Count(buf.String(), s) }
	down := func(peer string) string {
		return `level=WARN msg="etcd: prober detected unhealthy status" logger=rafthttp error="connection refused" local-member-id=m1 remote-peer-id=` + peer
	}
	back := func(peer string) string {
		return `level=INFO msg="etcd: peer became active" logger=rafthttp local-member-id=m1 peer-id=` + peer
	}

	lg.Info("peer became active", zap.String("peer-id", "p2")) // first contact
	lg.Info("peer became active", zap.String("peer-id", "p3"))
	for range 10 {
		probe("p2")
		clock.now = clock.now.Add(5 * time.Second)
	}
	probe("p3")
	if count(down("p2")) != 1 || count(down("p3")) != 1 || count("prober detected") != 2 {
		t.Fatalf("want one warning per unreachable peer:\n%s", buf.String())
	}
	if count("peer became active") != 0 {
		t.Fatalf("first contact with a peer logged at info:\n%s", buf.String())
	}
	lg.Info("peer became active", zap.String("peer-id", "p2"))
	lg.Info("peer became active", zap.String("peer-id", "p2"))
	if count(back("p2")) != 1 || count("peer became active") != 1 {
		t.Fatalf("want one line when p2 is back:\n%s", buf.String())
	}
	probe("p2") // down again
	if count(down("p2")) != 2 {
		t.Fatalf("p2 down again not said:\n%s", buf.String())
	}
	// p3's stream never broke, but its prober found it healthy in between
	// (it checks again 30 s later): a new outage.
	clock.now = clock.now.Add(35 * time.Second)
	probe("p3")
	if count(down("p3")) != 2 || count("prober detected") != 4 {
		t.Fatalf("p3 unreachable again after a healthy spell not said once:\n%s", buf.String())
	}
}
