package leaktest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/mayflydb/mayfly/internal/testport"
)

// The goroutine EtcdStoppingMember ignores is real: a peer's /version
// request served after the member's server stopped (as Close stops it
// before its peer listeners) panics, the next one hangs for good, and
// leaktest without the option reports it. Once etcd's fix is in go.mod the
// second request is answered, this test fails, and the option can go.
func TestEtcdStoppingMember(t *testing.T) {
	p := testport.Consecutive(t, 2)
	peer := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", p)}
	client := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", p+1)}
	ec := embed.NewConfig()
	ec.Name = "m"
	ec.Dir = t.TempDir()
	ec.ListenPeerUrls, ec.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	ec.ListenClientUrls, ec.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	ec.InitialCluster = "m=" + peer.String()
	ec.Logger = "zap"
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	ec.UnsafeNoFsync = true
	e, err := embed.StartEtcd(ec)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(time.Minute):
		e.Close()
		t.Fatal("the member did not start within a minute")
	}

	hc := &http.Client{Timeout: 3 * time.Second}
	get := func() error {
		resp, err := hc.Get(peer.String() + "/version")
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := get(); err != nil {
		t.Fatalf("/version of a running member: %v", err)
	}
	e.Server.Stop()
	_ = get() // panics in etcd's handler, which leaves a lock held
	err = get()
	e.Close()
	hc.CloseIdleConnections()
	if !errors.Is(err, context.DeadlineExceeded) && !strings.Contains(fmt.Sprint(err), "Timeout") {
		t.Fatalf("a second /version after the stop answered (%v): etcd-io/etcd#22189 looks fixed; drop EtcdStoppingMember", err)
	}

	if err := Find(2 * time.Second); err == nil || !strings.Contains(err.Error(), "versionHandler") {
		t.Fatalf("without the option: %v, want the stuck /version handler reported", err)
	}
	if err := Find(Wait, EtcdStoppingMember()); err != nil {
		t.Fatalf("with the option: %v", err)
	}
}
