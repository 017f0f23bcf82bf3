package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
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

// addTLSPorts adds the TLS twins to p: the KV TLS port when kvTLSLn is
// open, and, when the HTTP API serves HTTPS, its management, views and
// search ports as mgmtSSL, capiSSL and ftsSSL.
func addTLSPorts(p *clusterconfig.Ports, https bool, kvTLSLn net.Listener) {
	if kvTLSLn != nil {
		if a, ok := kvTLSLn.Addr().(*net.TCPAddr); ok {
			p.KVSSL = a.Port
		}
	}
	if https {
		p.MgmtSSL, p.CapiSSL, p.FTSSSL = p.Mgmt, p.Capi, p.FTS
	}
}

// listenKVTLS opens --kv-tls with the certificate of --tls-cert.
func listenKVTLS(cfg *serveConfig) (net.Listener, error) {
	tlsCfg, err := loadTLS(cfg)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.kvTLSAddr)
	if err != nil {
		return nil, fmt.Errorf("--kv-tls: %w", err)
	}
	return tls.NewListener(ln, tlsCfg), nil
}

// startKV serves the binary KV port on each listener given (the plain one
// and the TLS one; nil ones are skipped), against every bucket.
func startKV(ctx context.Context, eng *engine.Engine, users *auth.Store, auditLog *audit.Log, pm *pager.Manager, ports clusterconfig.Ports, logger *slog.Logger, lns ...net.Listener) (*kv.Server, error) {
	s, err := kv.New(eng, &kv.Options{Auth: users, Audit: auditLog.Record, PagerStats: pm.Stats, Ports: ports, Logger: logger})
	if err != nil {
		return nil, err
	}
	for _, ln := range lns {
		if ln == nil {
			continue
		}
		go func() {
			if err := s.Serve(ctx, ln); err != nil && !errors.Is(err, kv.ErrServerClosed) && ctx.Err() == nil {
				logger.Error("KV port stopped", "addr", ln.Addr(), "err", err)
			}
		}()
	}
	return s, nil
}
