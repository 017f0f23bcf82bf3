package main

import (
	"context"
	"errors"
	"log/slog"
	"net"

	"github.com/mayflydb/mayfly/audit"
	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/internal/clusterconfig"
	"github.com/mayflydb/mayfly/kv"
	"github.com/mayflydb/mayfly/pager"
)

// clusterPorts are the ports the cluster configuration lists: the HTTP
// API's serves management, views (capi) and search (fts); kvLn, if open,
// is the KV port.
func clusterPorts(httpLn, kvLn net.Listener) clusterconfig.Ports {
	var p clusterconfig.Ports
	if a, ok := httpLn.Addr().(*net.TCPAddr); ok {
		p.Mgmt, p.Capi, p.FTS = a.Port, a.Port, a.Port
	}
	if kvLn != nil {
		if a, ok := kvLn.Addr().(*net.TCPAddr); ok {
			p.KV = a.Port
		}
	}
	return p
}

// startKV serves the binary KV port on ln, against every bucket.
func startKV(ctx context.Context, eng *engine.Engine, users *auth.Store, auditLog *audit.Log, pm *pager.Manager, ports clusterconfig.Ports, logger *slog.Logger, ln net.Listener) (*kv.Server, error) {
	s, err := kv.New(eng, &kv.Options{Auth: users, Audit: auditLog.Record, PagerStats: pm.Stats, Ports: ports, Logger: logger})
	if err != nil {
		return nil, err
	}
	go func() {
		if err := s.Serve(ctx, ln); err != nil && !errors.Is(err, kv.ErrServerClosed) && ctx.Err() == nil {
			logger.Error("KV port stopped", "err", err)
		}
	}()
	return s, nil
}
