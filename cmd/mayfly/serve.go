package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mayflydb/mayfly/audit"
	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/cluster"
	"github.com/mayflydb/mayfly/console"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/httpapi"
	"github.com/mayflydb/mayfly/index"
	"github.com/mayflydb/mayfly/internal/memtune"
	"github.com/mayflydb/mayfly/internal/netaddr"
	"github.com/mayflydb/mayfly/jsruntime"
	"github.com/mayflydb/mayfly/memcache"
	"github.com/mayflydb/mayfly/pager"
	"github.com/mayflydb/mayfly/search"
	"github.com/mayflydb/mayfly/views"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// serveConfig is what `mayfly serve` is told by its flags.
// defaultViewCacheMB is --view-cache-mb's default: persisted view indexes
// are paged through a page cache of 32 MiB (BENCHMARKS.md, "Paged view
// indexes: the default").
const defaultViewCacheMB = 32

type serveConfig struct {
	data          string
	httpAddr      string
	defaultBucket string
	noSync        bool
	storage       string
	numVBuckets   int
	shutdownWait  time.Duration
	logLevel      string
	level         slog.Level // logLevel, parsed with the flags
	jsTimeout     time.Duration
	jsWorkers     int
	jsMaxMemory   int64
	skipDDocs     string
	pprofAddr     string
	memOverhead   string // --memory-overhead-mb as given: auto or MiB
	memOverheadMB int64  // MiB, from memOverhead; -1: the limit is left alone
	memAuto       bool   // memOverhead is auto
	viewCacheMB   int64
	heapRatio     float64
	heapHeadroom  int64
	mcAddr        string
	mcBucket      string
	mcMaxConns    int
	mcRemote      bool
	mcIdle        time.Duration
	mcCommand     time.Duration
	mcItemSize    int
	mcDurability  string
	mcIO          string
	flushInterval time.Duration
	kvAddr        string
	kvRemote      bool
	kvTLSAddr     string
	viewsAddr     string
	searchAddr    string

	adminUser     string
	adminPassword string
	devPassword   bool // adminPassword was generated for this start
	allowedHosts  stringList
	corsOrigins   stringList
	metricsToken  string
	maxRequests   int
	reserved      int
	userStreams   int
	minBodyRate   int
	bodyGrace     time.Duration
	failInterval  time.Duration
	tlsCert       string
	tlsKey        string
	readHeader    time.Duration
	readTimeout   time.Duration
	writeTimeout  time.Duration
	idleTimeout   time.Duration

	warmupHook func(bucket string, loaded int64) // engine.Options.WarmupHook, for tests

	cl clusterFlags // --node, --peers and the cluster's ports and timeouts (cluster.go)

	faults faultConfig // fault injection, only in a chaos build (faults_chaos.go)
}

// stringList is a repeatable flag; each use may also hold a comma-separated
// list.
type stringList []string

// String is the list, comma-separated.
func (l *stringList) String() string { return strings.Join(*l, ",") }

// Type names the flag's value in help.
func (l *stringList) Type() string { return "strings" }

// Set adds v's comma-separated items.
func (l *stringList) Set(v string) error {
	for part := range strings.SplitSeq(v, ",") {
		if part = strings.TrimSpace(part); part != "" {
			*l = append(*l, part)
		}
	}
	return nil
}

// maxHeaderBytes bounds a request's headers; more is a 431.
const maxHeaderBytes = 64 << 10

// serveFlags defines serve's flags on fs, bound to the config it returns.
func serveFlags(fs *pflag.FlagSet) *serveConfig {
	c := &serveConfig{}
	fs.StringVar(&c.data, "data", "./data", "data directory (created if missing)")
	fs.StringVar(&c.httpAddr, "http", "127.0.0.1:8091", "HTTP API listen address")
	fs.StringVar(&c.defaultBucket, "default-bucket", "default", "bucket created on first start (\"\" for none)")
	fs.BoolVar(&c.noSync, "no-sync", false, "skip fsync on commit (faster; a machine crash may lose acknowledged writes)")
	fs.DurationVar(&c.flushInterval, "flush-interval", engine.DefaultFlushInterval, "longest a write acknowledged from memory (durability none or majority) waits before the commit that takes it to disk starts; a crash can lose the writes of the last interval and one commit")
	fs.StringVar(&c.storage, "storage", engine.StoragePebble, "store of new couchbase buckets: pebble or bolt (a bucket already on disk keeps the one it was created with)")
	fs.IntVar(&c.numVBuckets, "num-vbuckets", 1024, "partitions (vBuckets) of a bucket created without numVBuckets, the first start's default bucket too, 1 to 1024 (every node of a cluster must give the same); fewer cost less on a small machine, a cluster's most of all (a Raft group each)")
	fs.DurationVar(&c.shutdownWait, "shutdown-timeout", time.Second, "how long shutdown waits for requests in flight (their contexts end at once)")
	fs.StringVar(&c.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&c.mcAddr, "memcached", "127.0.0.1:11211", "memcached text-protocol listen address (\"\" turns it off); loopback only unless --memcached-allow-remote")
	fs.BoolVar(&c.mcRemote, "memcached-allow-remote", false, "let --memcached listen beyond loopback (the memcached port has no authentication)")
	fs.StringVar(&c.kvAddr, "kv", "127.0.0.1:11210", "binary KV port for Couchbase SDKs (\"\" turns it off); loopback only unless --kv-allow-remote")
	fs.BoolVar(&c.kvRemote, "kv-allow-remote", false, "let --kv listen beyond loopback (SASL PLAIN without TLS: passwords cross the network in clear)")
	fs.StringVar(&c.kvTLSAddr, "kv-tls", "127.0.0.1:11207", "binary KV port over TLS for couchbases:// SDKs, served when --tls-cert is given (\"\" turns it off)")
	fs.StringVar(&c.viewsAddr, "views", "127.0.0.1:8092", "Couchbase's views port (capi): design documents and view queries, as on --http, for SDKs that look there (\"\" turns it off; the cluster configuration then lists --http)")
	fs.StringVar(&c.searchAddr, "search", "127.0.0.1:8094", "Couchbase's search port (fts): the search REST API, as on --http, for SDKs that look there (\"\" turns it off; the cluster configuration then lists --http)")
	fs.StringVar(&c.adminUser, "admin-user", "Administrator", "the built-in administrator's user name (role admin; not stored in users.json)")
	fs.StringVar(&c.adminPassword, "admin-password", "", "the administrator's password (default $MAYFLY_ADMIN_PASSWORD; required beyond loopback; on loopback without one, a random one is printed at start)")
	fs.Var(&c.allowedHosts, "allowed-hosts", "Host header values answered besides the listen address and localhost/127.0.0.1/[::1] with its port: name or name:port (repeatable, comma-separated)")
	fs.Var(&c.corsOrigins, "cors-origin", "a browser origin (scheme://host[:port]) allowed to call the API cross-origin (repeatable; none by default)")
	fs.StringVar(&c.metricsToken, "metrics-token", "", "bearer token also accepted on /metrics, for Prometheus (default $MAYFLY_METRICS_TOKEN)")
	fs.IntVar(&c.maxRequests, "max-requests", httpapi.DefaultMaxRequests, "most HTTP requests served at once, counted once authenticated; more are answered 503")
	fs.IntVar(&c.userStreams, "max-streams-per-user", httpapi.DefaultMaxStreamsPerUser, "most long-lived HTTP streams (continuous, longpoll and eventsource change feeds, configuration streams) one user may hold open; more are answered 429")
	fs.IntVar(&c.reserved, "reserved-requests", 0, "of --max-requests, slots that requests still receiving a large or chunked body cannot take (0: a quarter)")
	fs.IntVar(&c.minBodyRate, "min-body-rate", httpapi.DefaultMinBodyRate, "slowest a request body may arrive, in bytes a second on average after --body-grace; slower is cut with 408")
	fs.DurationVar(&c.bodyGrace, "body-grace", httpapi.DefaultBodyGrace, "time a request body has before --min-body-rate applies")
	fs.DurationVar(&c.failInterval, "failed-login-log-interval", httpapi.DefaultFailureLogInterval*time.Second, "failed logins from one address and user name are logged and audited once, then counted into one line per interval")
	fs.StringVar(&c.tlsCert, "tls-cert", "", "PEM certificate (chain) file: serve HTTPS (with --tls-key)")
	fs.StringVar(&c.tlsKey, "tls-key", "", "PEM private key file of --tls-cert")
	fs.DurationVar(&c.readHeader, "read-header-timeout", 10*time.Second, "time to read a request's headers")
	fs.DurationVar(&c.readTimeout, "read-timeout", time.Minute, "time to read a whole request, body included")
	fs.DurationVar(&c.writeTimeout, "write-timeout", 10*time.Minute, "time to write an answer (long view answers stream within it)")
	fs.DurationVar(&c.idleTimeout, "idle-timeout", 2*time.Minute, "how long an idle keep-alive connection stays open")
	fs.StringVar(&c.mcBucket, "memcached-bucket", "default", "bucket the memcached port serves")
	fs.IntVar(&c.mcMaxConns, "memcached-max-conns", 1024, "most memcached connections at once")
	fs.DurationVar(&c.mcIdle, "memcached-idle-timeout", memcache.DefaultIdleTimeout, "close a memcached connection idle this long between commands (memcached's -o idle_timeout; counted in idle_kicks)")
	fs.StringVar(&c.mcDurability, "memcached-durability", "", "durability level of the memcached port's writes: none, majority, majorityAndPersistActive or persistToMajority (\"\": the bucket's durabilityMinLevel, which raises a lower one)")
	fs.StringVar(&c.mcIO, "memcached-io", string(memcache.DefaultIO), "how the memcached port serves its connections: eventloop (event loops on epoll, Linux only) or goroutines (a goroutine per connection)")
	fs.DurationVar(&c.mcCommand, "memcached-command-timeout", memcache.DefaultCommandTimeout, "close a memcached connection whose command (line and value) began to arrive but did not finish within this long")
	fs.IntVar(&c.mcItemSize, "memcached-item-size-max", 1<<20, "largest item the memcached port stores, in bytes, counted as memcached counts it (memcached's -I; at most the 20 MiB document limit)")
	fs.DurationVar(&c.jsTimeout, "js-timeout", 5*time.Second, "time limit of one map or reduce call")
	fs.IntVar(&c.jsWorkers, "js-workers", 0, "JavaScript runtimes for view indexing (0: one per core)")
	fs.Int64Var(&c.jsMaxMemory, "js-max-memory", jsruntime.DefaultMaxMemory, "bytes one map or reduce call may allocate (-1: no limit)")
	fs.StringVar(&c.memOverhead, "memory-overhead-mb", "auto", "MiB added to the sum of the buckets' ramQuotaMB (each at least its mem_used) and twice --view-cache-mb to make Go's memory limit (the collector works harder near it, and gives freed memory back); auto: 128 MiB plus half of the buckets' sum, shrinking to 96 MiB from 512 MiB to 1 GiB of buckets, and at least a twelfth above the live heap; -1 leaves the limit alone, as does $GOMEMLIMIT")
	fs.Float64Var(&c.heapRatio, "heap-ratio", memtune.DefaultRatio, "after each collection, set Go's GC percent so that the heap may grow to this many times the live heap (plus --heap-headroom-mb) before the next one: resident memory near the live heap for more collections; 0 keeps Go's GOGC (100: twice the live heap), as does $GOGC")
	fs.Int64Var(&c.heapHeadroom, "heap-headroom-mb", memtune.DefaultHeadroom>>20, "MiB of heap growth allowed beyond --heap-ratio × the live heap (keeps a small heap from being collected without pause)")
	fs.Int64Var(&c.viewCacheMB, "view-cache-mb", defaultViewCacheMB, "MiB of page cache shared by every persisted view index, which keeps its B+tree on disk (paged) and its changes not yet written in as much again; 0 keeps view indexes wholly in memory instead (as an ephemeral bucket's always are). Both counted in Go's memory limit. Switching rebuilds each index once")
	fs.StringVar(&c.pprofAddr, "pprof", "", "serve Go's profiles (/debug/pprof/) on this address, without authentication (for measuring; loopback only, e.g. 127.0.0.1:6060); empty: off")
	fs.StringVar(&c.skipDDocs, "skip-design-docs", "", "comma-separated bucket/_design/name of stored design documents not to load at start")
	addClusterFlags(fs, &c.cl)
	c.faults.register(fs)
	return c
}

// finish applies the environment's defaults (kept out of the flags'
// defaults so that --help does not print secrets) and checks the values.
func (c *serveConfig) finish() error {
	if c.adminPassword == "" {
		c.adminPassword = os.Getenv("MAYFLY_ADMIN_PASSWORD")
	}
	if c.metricsToken == "" {
		c.metricsToken = os.Getenv("MAYFLY_METRICS_TOKEN")
	}
	if c.memAuto = c.memOverhead == "auto"; !c.memAuto {
		n, err := strconv.ParseInt(c.memOverhead, 10, 64)
		if err != nil || n < -1 {
			return &usageError{"--memory-overhead-mb must be auto, -1 (leave Go's memory limit alone) or MiB (0 or more)"}
		}
		c.memOverheadMB = n
	}
	for _, bad := range []struct {
		ok   bool
		flag string
	}{
		{c.jsTimeout > 0, "--js-timeout must be positive"},
		{c.jsWorkers >= 0, "--js-workers must be 0 (one per core) or more"},
		{c.jsMaxMemory > 0 || c.jsMaxMemory == -1, "--js-max-memory must be positive or -1"},
		{c.heapRatio == 0 || (c.heapRatio >= 1.1 && c.heapRatio <= 2), "--heap-ratio must be 0 (Go's GOGC) or from 1.1 to 2"},
		{c.heapHeadroom >= 0, "--heap-headroom-mb must be 0 or more"},
		{c.viewCacheMB >= 0, "--view-cache-mb must be 0 (view indexes in memory) or more"},
		{c.shutdownWait > 0, "--shutdown-timeout must be positive"},
		{c.mcMaxConns > 0, "--memcached-max-conns must be positive"},
		{c.maxRequests > 0, "--max-requests must be positive"},
		{c.userStreams > 0, "--max-streams-per-user must be positive"},
		{c.reserved >= 0 && (c.reserved < c.maxRequests || c.reserved == 0), "--reserved-requests must be 0 or more, and less than --max-requests"},
		{c.minBodyRate > 0 && c.bodyGrace > 0, "--min-body-rate and --body-grace must be positive"},
		{c.failInterval >= time.Second, "--failed-login-log-interval must be at least 1s"},
		{c.mcIdle > 0 && c.mcCommand > 0, "--memcached-idle-timeout and --memcached-command-timeout must be positive"},
		{c.readHeader > 0 && c.readTimeout > 0 && c.writeTimeout > 0 && c.idleTimeout > 0, "--read-header-timeout, --read-timeout, --write-timeout and --idle-timeout must be positive"},
		{(c.tlsCert == "") == (c.tlsKey == ""), "--tls-cert and --tls-key go together"},
		{c.adminUser != "", "--admin-user must not be empty"},
		{c.flushInterval > 0, "--flush-interval must be positive"},
		{c.storage == engine.StoragePebble || c.storage == engine.StorageBolt, "--storage must be pebble or bolt"},
		{c.numVBuckets >= 1 && c.numVBuckets <= engine.MaxVBuckets, "--num-vbuckets must be from 1 to 1024"},
		{c.mcIO == string(memcache.IOEventLoop) || c.mcIO == string(memcache.IOGoroutines), "--memcached-io must be eventloop or goroutines"},
	} {
		if !bad.ok {
			return &usageError{bad.flag}
		}
	}
	if err := c.level.UnmarshalText([]byte(c.logLevel)); err != nil {
		return &usageError{"--log-level must be debug, info, warn or error"}
	}
	mo := memcache.Options{MaxItemSize: c.mcItemSize}
	mo.EnsureDefaults()
	if err := mo.Validate(); err != nil {
		_, why, _ := strings.Cut(err.Error(), "MaxItemSize ")
		return &usageError{"--memcached-item-size-max " + why}
	}
	for _, o := range c.corsOrigins {
		// A browser's Origin header is scheme://host[:port]: a value of
		// another shape could never match one.
		u, err := url.Parse(strings.TrimRight(strings.TrimSpace(o), "/"))
		if err != nil || u.Scheme == "" || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return &usageError{fmt.Sprintf("--cors-origin %q must be a browser origin, scheme://host[:port] (https://app.example.com)", o)}
		}
	}
	if _, err := engine.ParseDurability(c.mcDurability); err != nil {
		return &usageError{"--memcached-durability must be none, majority, majorityAndPersistActive or persistToMajority"}
	}
	// Checked before the data directory is made: the bucket is created on
	// a first start only, so a start that failed to create it would leave a
	// data directory where no corrected start creates it.
	if c.defaultBucket != "" {
		if err := engine.DefaultBucketSettings(c.defaultBucket).Validate(); err != nil {
			return &usageError{"--default-bucket: " + strings.TrimPrefix(err.Error(), "engine: ")}
		}
	}
	if err := c.checkExposure(); err != nil {
		return &usageError{err.Error()}
	}
	return c.cl.check()
}

// parseServeFlags parses serve's command line (without the word serve).
// Mistakes are explained on stderr and returned as errors matching errUsage.
func parseServeFlags(args []string, stderr io.Writer) (*serveConfig, error) {
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	c := serveFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil, errHelp
		}
		return nil, &usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "mayfly serve: unexpected argument %q\n", fs.Arg(0))
		return nil, usagef("unexpected argument %q", fs.Arg(0))
	}
	if err := c.finish(); err != nil {
		fmt.Fprintf(stderr, "mayfly serve: %v\n", err)
		return nil, err
	}
	return c, nil
}

// engineOptions are the engine's options the flags give.
func (c *serveConfig) engineOptions(logger *slog.Logger) *engine.Options {
	o := &engine.Options{Logger: logger, NoSync: c.noSync, FlushInterval: c.flushInterval, Storage: c.storage, NumPartitions: c.numVBuckets,
		BackgroundWarmup: true, WarmupHook: c.warmupHook}
	if c.cl.peers != "" {
		// A bucket created on a cluster without a replicaNumber has the
		// cluster's default; a single node's has Couchbase's (1).
		o.ReplicaNumber = engine.Replicas(cluster.DefaultReplicaNumber)
	}
	return o
}

// newServeCmd is `mayfly serve`.
func newServeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve [flags]",
		Short: "Start the server (HTTP API, memcached port) on a data directory",
		Long: `Starts Mayfly on a data directory. SIGINT or SIGTERM shuts it down cleanly,
flushing every acknowledged write.

A cluster (issue 22, steps 1 and 2b): --node NAME --peers n1=HOST:PORT,n2=HOST:PORT,...
where PORT is each node's cluster port P. The first 3 nodes of the list (5
when it has 5 or more) run an embedded etcd member: its peer port is P+1 and
its client port P+2 (--cluster-etcd-peer-offset, --cluster-etcd-client-offset;
the same on every node); P itself carries replication: the node's Raft
groups, one per partition it holds a copy of, stored under
<data>/cluster/raft. etcd
holds the nodes (each on a lease), the elected orchestrator, the bucket
definitions and each bucket's partition map; see mayfly cluster status.
` + replicatedNote + `. --cluster-tls DIR (made by mayfly cluster
certs) puts the cluster port and etcd's ports on mutual TLS, every node
authenticated by its certificate; without it they have no authentication,
and beyond loopback need --cluster-allow-remote. Without --peers, Mayfly is
a single node and starts no etcd.`,
		Args: noArgs,
	}
	cfg := serveFlags(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := cfg.finish(); err != nil {
			return err
		}
		return serve(cmd.Context(), cfg, cmd.OutOrStdout(), cmd.ErrOrStderr())
	}
	return cmd
}

// checkExposure refuses to listen beyond loopback without an administrator
// password, or to open the unauthenticated memcached port beyond loopback
// without --memcached-allow-remote, or Go's profiles (--pprof) beyond
// loopback at all. On loopback without a password it makes
// one up for this start.
func (c *serveConfig) checkExposure() error {
	if c.adminPassword == "" {
		for _, f := range []struct{ flag, addr string }{{"--http", c.httpAddr}, {"--views", c.viewsAddr}, {"--search", c.searchAddr}} {
			if f.addr != "" && !netaddr.IsLoopback(f.addr) {
				return fmt.Errorf("%s %s listens beyond loopback: set --admin-password (or MAYFLY_ADMIN_PASSWORD) first", f.flag, f.addr)
			}
		}
		var b [12]byte
		if _, err := rand.Read(b[:]); err != nil {
			return err
		}
		c.adminPassword = hex.EncodeToString(b[:])
		c.devPassword = true
	}
	if c.mcAddr != "" && !c.mcRemote && !netaddr.IsLoopback(c.mcAddr) {
		return fmt.Errorf("--memcached %s listens beyond loopback and the memcached port has no authentication: add --memcached-allow-remote to mean it", c.mcAddr)
	}
	if c.pprofAddr != "" && !netaddr.IsLoopback(c.pprofAddr) {
		return fmt.Errorf("--pprof %s listens beyond loopback and Go's profiles have no authentication (a heap profile or the command line may show passwords): give a loopback address", c.pprofAddr)
	}
	if c.tlsCert != "" && c.kvTLSAddr != "" && !netaddr.IsLoopback(c.kvTLSAddr) && c.devPassword {
		return fmt.Errorf("--kv-tls %s listens beyond loopback: set --admin-password (or MAYFLY_ADMIN_PASSWORD) first", c.kvTLSAddr)
	}
	if c.kvAddr != "" && !netaddr.IsLoopback(c.kvAddr) {
		if c.devPassword {
			return fmt.Errorf("--kv %s listens beyond loopback: set --admin-password (or MAYFLY_ADMIN_PASSWORD) first", c.kvAddr)
		}
		if !c.kvRemote {
			return fmt.Errorf("--kv %s listens beyond loopback and the KV port takes SASL PLAIN without TLS: add --kv-allow-remote to mean it", c.kvAddr)
		}
	}
	return nil
}

// listenHTTP opens the HTTP listener: plain or TLS, with Go's own plain-text
// errors rewritten as JSON.
func listenHTTP(cfg *serveConfig) (ln net.Listener, scheme string, err error) {
	return listenHTTPOn(cfg, "--http", cfg.httpAddr)
}

// listenHTTPOn opens an HTTP listener on addr (given by flag), as
// listenHTTP: the views and search ports are HTTP ports like --http, with
// its TLS.
func listenHTTPOn(cfg *serveConfig, flag, addr string) (ln net.Listener, scheme string, err error) {
	var tlsCfg *tls.Config
	if cfg.tlsCert != "" {
		if tlsCfg, err = loadTLS(cfg); err != nil {
			return nil, "", err
		}
		tlsCfg.NextProtos = []string{"http/1.1"}
	}
	tcp, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", flag, err)
	}
	if tlsCfg == nil {
		return httpapi.JSONErrors(tcp), "http", nil
	}
	// The wrapper hides *tls.Conn from net/http, so it serves HTTP/1.1 only
	// and the TLS handshake runs on the first read, under
	// --read-header-timeout.
	return httpapi.JSONErrors(tls.NewListener(tcp, tlsCfg)), "https", nil
}

// loadTLS is the TLS configuration of --tls-cert and --tls-key.
func loadTLS(cfg *serveConfig) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(cfg.tlsCert, cfg.tlsKey)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// newHTTPServer is the http.Server with the configured limits at the door.
func newHTTPServer(cfg *serveConfig, h http.Handler, logger *slog.Logger, base context.Context) *http.Server {
	return &http.Server{
		BaseContext:       func(net.Listener) context.Context { return base },
		Handler:           h,
		ReadHeaderTimeout: cfg.readHeader,
		ReadTimeout:       cfg.readTimeout,
		WriteTimeout:      cfg.writeTimeout,
		IdleTimeout:       cfg.idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}

// runServe is `mayfly serve` given its command line (without the word
// serve).
func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseServeFlags(args, stderr)
	if err != nil {
		return err
	}
	return serve(ctx, cfg, stdout, stderr)
}

// serve runs the server cfg describes until ctx ends.
func serve(ctx context.Context, cfg *serveConfig, stdout, stderr io.Writer) error {
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: cfg.level}))
	// The executable's identity as it starts: its pages are released from
	// memory later only while its file is unchanged (binpages_linux.go).
	binPages, err := newBinaryPages()
	if err != nil {
		logger.Warn("the executable's pages will stay mapped", "err", err)
	}

	// Every port is bound before anything is created: a port that is taken
	// leaves no data directory or bucket behind.
	ln, scheme, err := listenHTTP(cfg)
	if err != nil {
		return err
	}
	defer ln.Close() // Serve closes it too; this covers an early return
	var mcLn net.Listener
	if cfg.mcAddr != "" {
		if mcLn, err = net.Listen("tcp", cfg.mcAddr); err != nil {
			return fmt.Errorf("--memcached: %w", err)
		}
		defer mcLn.Close()
	}
	var kvLn net.Listener
	if cfg.kvAddr != "" {
		if kvLn, err = net.Listen("tcp", cfg.kvAddr); err != nil {
			return fmt.Errorf("--kv: %w", err)
		}
		defer kvLn.Close()
	}
	var kvTLSLn net.Listener
	if cfg.kvTLSAddr != "" && cfg.tlsCert != "" {
		if kvTLSLn, err = listenKVTLS(cfg); err != nil {
			return err
		}
		defer kvTLSLn.Close()
	}
	svcLns := map[httpapi.ServicePort]net.Listener{}
	for _, f := range []struct {
		port       httpapi.ServicePort
		flag, addr string
	}{{httpapi.ViewsPort, "--views", cfg.viewsAddr}, {httpapi.SearchPort, "--search", cfg.searchAddr}} {
		if f.addr == "" {
			continue
		}
		sln, _, err := listenHTTPOn(cfg, f.flag, f.addr)
		if err != nil {
			return err
		}
		defer sln.Close()
		svcLns[f.port] = sln
	}
	ports := clusterPorts(ln, kvLn, svcLns)
	addTLSPorts(&ports, scheme == "https", kvTLSLn)

	// The users first: hashing the administrator's password takes the CPU
	// for a while, better before the buckets' warm-ups share it.
	users, err := auth.Open(cfg.data, &auth.Options{AdminUser: cfg.adminUser, AdminPassword: cfg.adminPassword})
	if err != nil {
		return err
	}

	debug.FreeOSMemory()

	if cfg.pprofAddr != "" {
		stopPprof, err := startPprof(cfg.pprofAddr, logger)
		if err != nil {
			return err
		}
		defer stopPprof()
	}
	// Each bucket's documents, and its view and search indexes, load in the
	// background (a warm-up, as Couchbase's): the ports answer at once.
	eng, err := engine.Open(cfg.data, cfg.engineOptions(logger))
	if err != nil {
		return err
	}
	defer func() {
		if err := eng.Close(); err != nil {
			logger.Error("closing the engine", "err", err)
		}
		logger.Info("stopped; every acknowledged write is on disk")
	}()
	// A deleted bucket's roles leave its users (bucketroles.go).
	roles := &bucketRoles{users: users, log: logger, clustered: cfg.cl.peers != ""}
	if err := eng.Attach(ctx, roles); err != nil {
		return err
	}
	if cfg.memOverheadMB >= 0 && os.Getenv("GOMEMLIMIT") == "" {
		prev := debug.SetMemoryLimit(-1) // reads it
		// The view page cache and as much again of changes not yet written.
		ml := newMemLimit(cfg.memOverheadMB+2*cfg.viewCacheMB, cfg.memAuto, debug.SetMemoryLimit, logger)
		defer ml.restore(prev) // as it was, for another serve in this process
		if err := eng.Attach(ctx, ml); err != nil {
			return err
		}
		mlCtx, stopML := context.WithCancel(context.Background())
		mlDone := make(chan struct{})
		go func() { defer close(mlDone); ml.refresh(mlCtx, 30*time.Second) }()
		defer func() { stopML(); <-mlDone }()
	}
	if cfg.heapRatio > 0 && os.Getenv("GOGC") == "" {
		// Stopped here, not by a context: a context's end stops the tuner
		// from another goroutine, after serve may have returned (and another
		// serve in this process started, found the tuned percent and kept it
		// as the one to restore).
		tuner := memtune.Start(context.Background(), memtune.Policy{Ratio: cfg.heapRatio, Headroom: uint64(cfg.heapHeadroom) << 20})
		defer tuner.Stop()
		logger.Debug("heap goal policy", "ratio", cfg.heapRatio, "headroom_mb", cfg.heapHeadroom, "gc_percent", tuner.Percent())
	}
	// A first start that failed or was killed before its end is a first
	// start again: the default bucket is created by whichever start ends.
	if eng.FirstStart() {
		if cfg.defaultBucket != "" {
			s := engine.DefaultBucketSettings(cfg.defaultBucket)
			if cfg.cl.peers != "" {
				// Every node of a cluster creates it on its first start: the
				// same incarnation on each (firstStartUUID).
				s.UUID = firstStartUUID(s.Name)
			}
			// Exists: created by a start killed before it ended.
			if _, err := eng.CreateBucket(ctx, s); err != nil && !errors.Is(err, engine.ErrBucketExists) {
				return fmt.Errorf("creating bucket %q: %w", cfg.defaultBucket, err)
			}
			logger.Info("first start: created bucket", "bucket", cfg.defaultBucket)
		}
		if err := eng.EndFirstStart(); err != nil {
			return err
		}
	}

	// A cluster (issue 22 steps 1 and 2b): its state in etcd, the
	// buckets' writes through their partitions' Raft groups (cluster.go,
	// replication.go).
	var cnode *cluster.Node
	var rt *router // where a key's requests go (route.go); nil on a single node
	if cfg.cl.peers != "" {
		kvAddr, mcAddr := "", ""
		if kvLn != nil {
			kvAddr = kvLn.Addr().String()
		}
		if mcLn != nil {
			mcAddr = mcLn.Addr().String()
		}
		var repl *replication
		if cnode, repl, err = startClusterNode(ctx, cfg, eng, ln.Addr().String(), kvAddr, mcAddr, ports, stdout, logger); err != nil {
			return err
		}
		rt = newRouter(eng, repl)
		defer cnode.Close()
		defer func() {
			if err := repl.Close(); err != nil {
				logger.Error("stopping replication", "err", err)
			}
		}()
	}

	var viewCache *index.PageCache
	if cfg.viewCacheMB > 0 {
		viewCache = index.NewPageCache(cfg.viewCacheMB << 20)
	}
	vsvc, err := views.New(ctx, eng, &views.Options{
		JS:               &jsruntime.Options{Timeout: cfg.jsTimeout, Workers: cfg.jsWorkers, MaxMemory: cfg.jsMaxMemory, Logger: logger},
		Logger:           logger,
		NoSync:           cfg.noSync,
		SkipDesignDocs:   strings.FieldsFunc(cfg.skipDDocs, func(r rune) bool { return r == ',' }),
		IndexCache:       viewCache,
		OpenInBackground: true,
	})
	if err != nil {
		return err
	}
	defer vsvc.Close()

	ssvc, err := search.New(ctx, eng, &search.Options{Logger: logger, NoSync: cfg.noSync, OpenInBackground: true})
	if err != nil {
		return err
	}
	defer ssvc.Close()

	// A cluster keeps its design documents, search definitions and
	// buckets' scopes and collections in etcd: written there by the node a
	// client asks, applied by every node (clusterdefs.go). A single node's
	// API calls the services and buckets directly.
	var ddocStore httpapi.DesignDocStore
	var collStore httpapi.CollectionStore
	var searchSvc httpapi.SearchService = ssvc
	// Its users too: written to etcd by the node asked, applied by every
	// node to its own store (cluster.UserSync; until its first apply, the
	// users of this node's users.json, perhaps stale, do not log in). The
	// node's administrator (--admin-user) stays its own; its name is
	// recorded, and no user of the cluster may take it.
	var userStore httpapi.UserStore
	// And its flushes: recorded in etcd, taken up by every node, each
	// partition flushed by its leader (clusterflush.go).
	var flusher httpapi.BucketFlusher
	var mcFlush func(context.Context, *engine.Bucket) error
	if cnode != nil {
		defs := startClusterDefs(cnode.Client(), eng, vsvc, ssvc, logger)
		defer defs.Close()
		ddocStore, collStore, searchSvc = defs, defs, clusterSearch{Service: ssvc, defs: defs}
		flusher = defs
		mcFlush = func(ctx context.Context, b *engine.Bucket) error {
			_, err := defs.FlushBucket(ctx, b)
			return err
		}
		usync := cluster.StartUserSync(cnode.Client(), users, cnode.Name(), logger)
		defer usync.Close()
		roles.sync.Store(usync)
		userStore = usync
	}
	// A cluster node's view queries find their coverage in its copy of the
	// maps and nodes that etcd watches keep current (cluster.go).
	var vcov *viewCoverage
	if cnode != nil {
		vcov = newViewCoverage(cnode.Name(), rt.mirror, scheme)
		// Its view indexes hold the partitions it covers (covagent.go).
		agent := startCoverAgent(cnode.Name(), rt.mirror, cnode.Client(), eng, vsvc, logger)
		defer agent.Close()
	}

	pagerRuns := httpapi.NewPagerRuns(0) // the console's chart of what each run purged
	pm := pager.New(eng, &pager.Options{Logger: logger, Events: &pager.Events{RunEnd: pagerRuns.RunEnd}})
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
	if tn := auditLog.Torn(); tn != nil {
		logger.Warn("audit log: a torn last line (a crash mid-write) was sealed with a marker record",
			"path", auditLog.Path(), "line", tn.Line, "skipped_lines", tn.Lines, "skipped_bytes", tn.Bytes, "marker", tn.Marker)
	}

	// Opening the user store hashed the administrator's password (argon2id:
	// 19 MiB a hash): memory the server no longer holds, which Go would
	// otherwise keep resident (BENCHMARKS.md, issue 20); given back before
	// the buckets' warm-ups start (a forced collection during a warm-up
	// delays the first answer by seconds). Every 30 s, what a burst of
	// load left free goes back too.
	idleCtx, stopIdle := context.WithCancel(context.Background())
	idleDone := make(chan struct{})
	go func() { defer close(idleDone); releaseIdleMemory(idleCtx, binPages, logger) }()
	defer func() { stopIdle(); <-idleDone }()

	// Requests in flight see their context end when shutdown begins, so a
	// query waiting for an index returns at once, and answers 503 (see
	// httpapi.ErrShuttingDown).
	reqCtx, endRequests := context.WithCancelCause(context.Background())
	defer endRequests(httpapi.ErrShuttingDown)
	// Recent samples of each bucket's statistics, for the console's charts.
	statsHistory := httpapi.NewStatsHistory(0, 0)
	histCtx, stopHistory := context.WithCancel(context.Background())
	histDone := make(chan struct{})
	go func() { defer close(histDone); statsHistory.Run(histCtx) }()
	defer func() { stopHistory(); <-histDone }()
	api := httpapi.New(eng, &httpapi.Options{
		Logger: logger, Views: vsvc, DesignDocs: ddocStore, Collections: collStore, Flusher: flusher, Users: userStore, Pager: pm, Audit: auditLog, Auth: users, Search: searchSvc,
		AllowedHosts: withPeerHosts(cfg.allowedHosts, cfg.cl.peers), CORSOrigins: cfg.corsOrigins,
		MetricsToken: cfg.metricsToken, MaxRequests: cfg.maxRequests,
		ReservedRequests: cfg.reserved, MaxStreamsPerUser: cfg.userStreams, MinBodyRate: cfg.minBodyRate, BodyGrace: cfg.bodyGrace,
		FailureLogInterval: int64(cfg.failInterval / time.Second),
		Console:            console.Handler(), PagerRuns: pagerRuns, StatsHistory: statsHistory,
		ClusterPorts: ports, Cluster: clusterView(cnode, ports), ViewCoverage: vcov.coverageFunc(), CopyCoverage: vcov.copiesFunc(),
		Route: rt.httpRouteFunc(), Topology: rt.topologyFunc(),
	})
	srv := newHTTPServer(cfg, cfg.faults.handler(api, rt), logger, reqCtx)
	httpErr := make(chan error, 2+len(svcLns))
	go func() { httpErr <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "mayfly: serving HTTP on %s://%s, data in %s\n", scheme, ln.Addr(), cfg.data)
	// The views and search ports: the same API (its slots, limits and
	// authentication), each answering its own service's paths.
	svcSrvs := []*http.Server{srv}
	// Whatever ends serve (a port that fails to start or stops, or the
	// shutdown below, whose graceful wait may pass), every HTTP port it
	// opened is closed with it.
	defer func() {
		for _, hs := range svcSrvs {
			hs.Close()
		}
	}()
	for _, p := range []httpapi.ServicePort{httpapi.ViewsPort, httpapi.SearchPort} {
		sln, ok := svcLns[p]
		if !ok {
			continue
		}
		ss := newHTTPServer(cfg, httpapi.Only(api, p), logger, reqCtx)
		svcSrvs = append(svcSrvs, ss)
		go func() {
			if err := ss.Serve(sln); !errors.Is(err, http.ErrServerClosed) {
				httpErr <- fmt.Errorf("%s port: %w", p, err)
			}
		}()
		fmt.Fprintf(stdout, "mayfly: serving the %s port (%s) for Couchbase SDKs on %s://%s\n", p, servicePortName(p), scheme, sln.Addr())
	}
	if cfg.devPassword {
		fmt.Fprintf(stdout, "mayfly: no --admin-password given; for this start only, log in as %s / %s\n", cfg.adminUser, cfg.adminPassword)
	}
	if scheme == "http" && !netaddr.IsLoopback(cfg.httpAddr) {
		logger.Warn("HTTP beyond loopback without TLS: passwords cross the network in clear (see --tls-cert)")
	}

	if cfg.mcAddr != "" {
		mc, err := startMemcached(ctx, eng, cfg, logger, auditLog, mcLn, rt.memcachedRouteFunc(cfg.mcBucket), mcFlush)
		if err != nil {
			srv.Close()
			return err
		}
		defer mc.Close()
		fmt.Fprintf(stdout, "mayfly: serving memcached on %s (bucket %s)\n", mcLn.Addr(), cfg.mcBucket)
	}

	if kvLn != nil || kvTLSLn != nil {
		kvs, err := startKV(ctx, eng, users, auditLog, pm, ports, rt.topologyFunc(), logger, kvLn, kvTLSLn)
		if err != nil {
			srv.Close()
			return err
		}
		defer kvs.Close()
		if kvLn != nil {
			fmt.Fprintf(stdout, "mayfly: serving the KV port for Couchbase SDKs on %s\n", kvLn.Addr())
		}
		if kvTLSLn != nil {
			fmt.Fprintf(stdout, "mayfly: serving the KV port over TLS on %s\n", kvTLSLn.Addr())
		}
	}

	// Start-up touched a page or more of nearly every package linked in
	// (their initialisers, the flags, the stores' opening): out of the
	// process's resident memory until they are used again (BENCHMARKS.md,
	// "Resident memory of an idle server").
	logBinaryRelease(binPages, logger)

	select {
	case <-ctx.Done():
		logger.Info("shutting down")
	case err := <-httpErr:
		return fmt.Errorf("http server: %w", err)
	}
	endRequests(httpapi.ErrShuttingDown)
	sctx, cancel := context.WithTimeout(context.Background(), cfg.shutdownWait)
	defer cancel()
	for _, hs := range svcSrvs {
		if err := hs.Shutdown(sctx); err != nil {
			logger.Warn("http shutdown", "err", err)
			hs.Close()
		}
	}
	return nil
}

// startMemcached opens the memcached text-protocol port onto one bucket,
// the one named cfg.mcBucket: a bucket deleted and created again under that
// name is served from its creation on (Options.Lookup). Its flush_all is
// audited in auditLog, and refused if it cannot be; flush, if set, flushes
// (a cluster node's flushes every node).
func startMemcached(ctx context.Context, eng *engine.Engine, cfg *serveConfig, logger *slog.Logger, auditLog *audit.Log, ln net.Listener,
	route func(context.Context, string) (memcache.Route, error), flush func(context.Context, *engine.Bucket) error) (*memcache.Server, error) {
	// A bucket not created yet (--default-bucket "", or deleted before
	// this start) is served once it is: until then each command on
	// documents is answered SERVER_ERROR bucket not found: NAME.
	b, err := eng.Bucket(cfg.mcBucket)
	if err != nil && !errors.Is(err, engine.ErrBucketNotFound) {
		return nil, fmt.Errorf("--memcached-bucket: %w", err)
	}
	mc, err := memcache.New(b, &memcache.Options{Clock: eng.Clock(), BucketName: cfg.mcBucket, MaxConns: cfg.mcMaxConns, MaxItemSize: cfg.mcItemSize, IdleTimeout: cfg.mcIdle, CommandTimeout: cfg.mcCommand, Durability: engine.Durability(cfg.mcDurability), IO: memcache.IOModel(cfg.mcIO), Logger: logger, Audit: memcacheAudit(eng, cfg.mcBucket, auditLog), Route: route, Flush: flush,
		Lookup: func() (*engine.Bucket, error) { return eng.Bucket(cfg.mcBucket) }})
	if err != nil {
		// Options' errors name their own field (a connection limit, a
		// durability level the bucket cannot keep, ...).
		return nil, fmt.Errorf("the memcached port on bucket %q: %w", cfg.mcBucket, err)
	}
	go func() {
		if err := mc.Serve(ctx, ln); err != nil && !errors.Is(err, memcache.ErrServerClosed) && ctx.Err() == nil {
			logger.Error("memcached port stopped", "err", err)
		}
	}()
	return mc, nil
}

// memcacheAudit records the memcached port's administrative commands
// (flush_all) in the audit log.
func memcacheAudit(eng *engine.Engine, bucket string, auditLog *audit.Log) func(context.Context, memcache.AuditEvent) error {
	return func(ctx context.Context, e memcache.AuditEvent) error {
		return auditLog.Record(ctx, audit.Event{Time: eng.Clock().Now(), Remote: e.Remote, Action: e.Action, Bucket: bucket,
			After: map[string]int64{"delay": e.Delay}})
	}
}

// withPeerHosts is the Host check's allowed names: those of
// --allowed-hosts and, on a cluster node, the hosts of --peers. The other
// nodes send their requests (a view's or a listing's shares, forwarded
// writes) to a node's advertised HTTP address, whose host is its --peers
// host: with host names rather than addresses there, the Host check would
// refuse them as misdirected (a name the operator listed is no
// DNS-rebinding page's).
func withPeerHosts(allowed []string, peers string) []string {
	if peers == "" {
		return allowed
	}
	ps, err := cluster.ParsePeers(peers)
	if err != nil {
		return allowed // serve refuses the list before it gets here
	}
	out := slices.Clone(allowed)
	for _, p := range ps {
		if !slices.Contains(out, p.Host) {
			out = append(out, p.Host)
		}
	}
	return out
}
