package cluster

import (
	"bytes"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

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
	quiet.Store(true)
	lg.Warn("closed connection")
	got := buf.String()
	for _, want := range []string{`level=WARN msg="etcd: lost peer" logger=raft member=n1 tries=3`, `level=ERROR msg="etcd: disk failed"`} {
		if !strings.Contains(got, want) {
			t.Errorf("log lacks %q:\n%s", want, got)
		}
	}
	for _, not := range []string{"starting a member", "simple token", "closed connection"} {
		if strings.Contains(got, not) {
			t.Errorf("log at info level has %q:\n%s", not, got)
		}
	}
}
