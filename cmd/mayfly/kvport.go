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
	"github.com/mayflydb/mayfly/httpapi"
	"github.com/mayflydb/mayfly/internal/clusterconfig"
	"github.com/mayflydb/mayfly/kv"
	"github.com/mayflydb/mayfly/pager"
)

// clusterPorts are the ports the cluster configuration lists: the HTTP
// API's serves management, and views (capi) and search (fts) unless their
// own ports are open (svc); kvLn, if open, is the KV port. addTLSPorts adds
// the TLS twins.
func clusterPorts(httpLn, kvLn net.Listener, svc map[httpapi.ServicePort]net.Listener) clusterconfig.Ports {
	port := func(ln net.Listener) int {
		if a, ok := ln.Addr().(*net.TCPAddr); ok {
			return a.Port
		}
		return 0
	}
	var p clusterconfig.Ports
	p.Mgmt = port(httpLn)
	p.Capi, p.FTS = p.Mgmt, p.Mgmt
	if ln, ok := svc[httpapi.ViewsPort]; ok {
		p.Capi = port(ln)
	}
	if ln, ok := svc[httpapi.SearchPort]; ok {
		p.FTS = port(ln)
	}
	if kvLn != nil {
		p.KV = port(kvLn)
	}
	return p
}

// servicePortName describes a service port in serve's start lines.
func servicePortName(p httpapi.ServicePort) string {
	if p == httpapi.SearchPort {
		return "search"
	}
	return "views"
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
func startKV(ctx context.Context, eng *engine.Engine, users *auth.Store, auditLog *audit.Log, pm *pager.Manager, ports clusterconfig.Ports,
	topology func(context.Context, string) (*clusterconfig.Topology, error), logger *slog.Logger, lns ...net.Listener) (*kv.Server, error) {
	s, err := kv.New(eng, &kv.Options{Auth: users, Audit: auditLog.Record, PagerStats: pm.Stats, Ports: ports, Topology: topology, Logger: logger})
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
