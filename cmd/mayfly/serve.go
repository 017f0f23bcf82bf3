package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/mayflydb/mayfly/audit"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/httpapi"
	"github.com/mayflydb/mayfly/jsruntime"
	"github.com/mayflydb/mayfly/memcache"
	"github.com/mayflydb/mayfly/pager"
	"github.com/mayflydb/mayfly/views"
)

// errUsage reports bad flags, already explained to the user; errHelp a
// request for help, already answered.
var (
	errUsage = errors.New("usage")
	errHelp  = errors.New("help")
)

// serveConfig is what `mayfly serve` is told by its flags.
type serveConfig struct {
	data          string
	httpAddr      string
	defaultBucket string
	noSync        bool
	shutdownWait  time.Duration
	logLevel      string
	jsTimeout     time.Duration
	jsWorkers     int
	jsMaxMemory   int64
	skipDDocs     string
	mcAddr        string
	mcBucket      string
	mcMaxConns    int
}

func parseServeFlags(args []string, stderr io.Writer) (*serveConfig, error) {
	c := &serveConfig{}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.data, "data", "./data", "data directory (created if missing)")
	fs.StringVar(&c.httpAddr, "http", "127.0.0.1:8091", "HTTP API listen address")
	fs.StringVar(&c.defaultBucket, "default-bucket", "default", "bucket created on first start (\"\" for none)")
	fs.BoolVar(&c.noSync, "no-sync", false, "skip fsync on commit (faster; a machine crash may lose acknowledged writes)")
	fs.DurationVar(&c.shutdownWait, "shutdown-timeout", time.Second, "how long shutdown waits for requests in flight (their contexts end at once)")
	fs.StringVar(&c.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&c.mcAddr, "memcached", "127.0.0.1:11211", "memcached text-protocol listen address (\"\" turns it off)")
	fs.StringVar(&c.mcBucket, "memcached-bucket", "default", "bucket the memcached port serves")
	fs.IntVar(&c.mcMaxConns, "memcached-max-conns", 1024, "most memcached connections at once")
	fs.DurationVar(&c.jsTimeout, "js-timeout", 5*time.Second, "time limit of one map or reduce call")
	fs.IntVar(&c.jsWorkers, "js-workers", 0, "JavaScript runtimes for view indexing (0: one per core)")
	fs.Int64Var(&c.jsMaxMemory, "js-max-memory", jsruntime.DefaultMaxMemory, "bytes one map or reduce call may allocate (-1: no limit)")
	fs.StringVar(&c.skipDDocs, "skip-design-docs", "", "comma-separated bucket/_design/name of stored design documents not to load at start")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: mayfly serve [flags]\n\nStarts Mayfly on a data directory. SIGINT or SIGTERM shuts it down cleanly,\nflushing every acknowledged write.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, errHelp
		}
		return nil, errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "mayfly serve: unexpected argument %q\n", fs.Arg(0))
		return nil, errUsage
	}
	for _, bad := range []struct {
		ok   bool
		flag string
	}{
		{c.jsTimeout > 0, "--js-timeout must be positive"},
		{c.jsWorkers >= 0, "--js-workers must be 0 (one per core) or more"},
		{c.jsMaxMemory > 0 || c.jsMaxMemory == -1, "--js-max-memory must be positive or -1"},
		{c.shutdownWait > 0, "--shutdown-timeout must be positive"},
		{c.mcMaxConns > 0, "--memcached-max-conns must be positive"},
	} {
		if !bad.ok {
			fmt.Fprintf(stderr, "mayfly serve: %s\n", bad.flag)
			return nil, errUsage
		}
	}
	return c, nil
}

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseServeFlags(args, stderr)
	if err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	firstStart := !engine.IsDataDir(cfg.data)
	eng, err := engine.Open(cfg.data, &engine.Options{Logger: logger, NoSync: cfg.noSync})
	if err != nil {
		return err
	}
	defer func() {
		if err := eng.Close(); err != nil {
			logger.Error("closing the engine", "err", err)
		}
		logger.Info("stopped; every acknowledged write is on disk")
	}()
	if firstStart && cfg.defaultBucket != "" {
		if _, err := eng.CreateBucket(ctx, engine.DefaultBucketSettings(cfg.defaultBucket)); err != nil {
			return fmt.Errorf("creating bucket %q: %w", cfg.defaultBucket, err)
		}
		logger.Info("first start: created bucket", "bucket", cfg.defaultBucket)
	}

	vsvc, err := views.New(ctx, eng, &views.Options{
		JS:             &jsruntime.Options{Timeout: cfg.jsTimeout, Workers: cfg.jsWorkers, MaxMemory: cfg.jsMaxMemory, Logger: logger},
		Logger:         logger,
		NoSync:         cfg.noSync,
		SkipDesignDocs: strings.FieldsFunc(cfg.skipDDocs, func(r rune) bool { return r == ',' }),
	})
	if err != nil {
		return err
	}
	defer vsvc.Close()

	pm := pager.New(eng, &pager.Options{Logger: logger})
	pm.Start()
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), cfg.shutdownWait)
		defer cancel()
		if err := pm.Close(cctx); err != nil {
			logger.Warn("stopping the expiry pager", "err", err)
		}
	}()
	auditLog, err := audit.Open(filepath.Join(cfg.data, audit.FileName))
	if err != nil {
		return err
	}
	defer auditLog.Close()

	ln, err := net.Listen("tcp", cfg.httpAddr)
	if err != nil {
		return fmt.Errorf("--http: %w", err)
	}
	// Requests in flight see their context end when shutdown begins, so a
	// query waiting for an index returns at once.
	reqCtx, endRequests := context.WithCancel(context.Background())
	defer endRequests()
	srv := &http.Server{
		BaseContext:       func(net.Listener) context.Context { return reqCtx },
		Handler:           httpapi.New(eng, &httpapi.Options{Logger: logger, Views: vsvc, Pager: pm, Audit: auditLog}),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	httpErr := make(chan error, 1)
	go func() { httpErr <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "mayfly: serving HTTP on http://%s, data in %s\n", ln.Addr(), cfg.data)

	if cfg.mcAddr != "" {
		mc, err := startMemcached(ctx, eng, cfg, logger)
		if err != nil {
			srv.Close()
			return err
		}
		defer mc.Close()
		fmt.Fprintf(stdout, "mayfly: serving memcached on %s (bucket %s)\n", cfg.mcAddr, cfg.mcBucket)
	}

	select {
	case <-ctx.Done():
		logger.Info("shutting down")
	case err := <-httpErr:
		return fmt.Errorf("http server: %w", err)
	}
	endRequests()
	sctx, cancel := context.WithTimeout(context.Background(), cfg.shutdownWait)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		logger.Warn("http shutdown", "err", err)
		srv.Close()
	}
	return nil
}

// startMemcached opens the memcached text-protocol port onto one bucket.
func startMemcached(ctx context.Context, eng *engine.Engine, cfg *serveConfig, logger *slog.Logger) (*memcache.Server, error) {
	b, err := eng.Bucket(cfg.mcBucket)
	if err != nil {
		return nil, fmt.Errorf("--memcached-bucket: %w", err)
	}
	mc, err := memcache.New(b, &memcache.Options{MaxConns: cfg.mcMaxConns, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("--memcached-max-conns: %w", err)
	}
	ln, err := net.Listen("tcp", cfg.mcAddr)
	if err != nil {
		return nil, fmt.Errorf("--memcached: %w", err)
	}
	go func() {
		if err := mc.Serve(ctx, ln); err != nil && !errors.Is(err, memcache.ErrServerClosed) && ctx.Err() == nil {
			logger.Error("memcached port stopped", "err", err)
		}
	}()
	return mc, nil
}
