# Mayfly — `make run` starts the server on the embedded default, `make test`
# runs every test. `make` alone lists the targets.
GO      ?= go
BIN     ?= bin/mayfly
DATA    ?= ./data
PKGS    := ./...
# cmd/mayfly/default.pgo is the CPU profile `make build` (and so `make run`)
# optimizes the server with: profile-guided optimization, about 7 % less CPU
# a memcached-port command (BENCHMARKS.md, "Profile-guided build"). Every
# other target turns it off: a build with a profile compiles each package
# again, about twice the CPU of a plain build, and the tests, vet and the
# fuzzers gain nothing from it. `make pgo` takes the profile again.
export GOFLAGS := $(GOFLAGS) -pgo=off
# FUZZTIME is a count of executions, not a duration: a duration races Go 1.26's
# fuzzing coordinator at its deadline on a busy machine (golang/go#75804: the
# target fails with "context deadline exceeded" and no failing input).
FUZZTIME ?= 3000x
SOAK    ?= 10m
# CHAOS is how long each of `make chaos`'s cases keeps its cluster under load
# (and kills); CASES picks some of them (kill,etcd,expiry,views,partition,figures), all
# by default, run one after the other.
CHAOS   ?= 2m
CASES   ?=
# LEVEL is the crash soak's bucket durabilityMinLevel (none, majority,
# majorityAndPersistActive, persistToMajority).
LEVEL   ?= persistToMajority
# EVICTION is the crash soak's bucket evictionPolicy (valueOnly, fullEviction).
EVICTION ?= valueOnly

.PHONY: help build pgo run test unit race race-all race-more fuzz norace vet fmt lint bench bench-pouch bench-big oracle tools deps clean soak chaos sdk node-sdk

help:
	@echo "make run      build and start mayfly serve (data in $(DATA), HTTP on 127.0.0.1:8091, Administrator / $(DEV_PASSWORD))"
	@echo "             other addresses or flags: make run ARGS=\"--http 127.0.0.1:9000 --memcached 127.0.0.1:9001\""
	@echo "make test     every test: vet, gofmt check, unit and integration tests with -race, model tests whole without it, the fuzz targets' seeds, the Couchbase SDK tests"
	@echo "make fuzz     fuzz every target for FUZZTIME executions ($(FUZZTIME)) beyond its seeds"
	@echo "make bench    the benchmarks (figures go in BENCHMARKS.md)"
	@echo "make bench-pouch  bulk load against pouchdb-server's _bulk_docs (installs it with npm)"
	@echo "make bench-big    issue 19's large-scale run against a started server (DOCS=5000000 VALUE=1024 QUOTA_MB=1024; ~6 GB of disk, long)"
	@echo "make oracle   differential tests against real peers (installs memcached if missing)"
	@echo "make build    build $(BIN), optimized with cmd/mayfly/default.pgo (the first build compiles every package: a few minutes)"
	@echo "make pgo      take cmd/mayfly/default.pgo again (bench/pgo.sh)"
	@echo "make soak     kill -9 crash test for $(SOAK) (make soak SOAK=30m for longer; LEVEL=none for a durability level; EVICTION=fullEviction)"
	@echo "make chaos    3-node cluster chaos test, each case for $(CHAOS): kill -9 a node every 20 s under load, no acknowledged write lost, linearizable (porcupine);"
	@echo "             cases kill, etcd (kill the etcd leader), expiry (purged once), views (against a model), partition (cut a node's Raft traffic 30 s),"
	@echo "             isolate/isolate4 (a real network partition of a node, etcd included, 30 s, on 3/4 nodes in network namespaces: root only),"
	@echo "             figures (3 nodes against 1); CASES=etcd,views for some"

build:
	$(GO) build -pgo=auto -o $(BIN) ./cmd/mayfly

# Takes cmd/mayfly/default.pgo again from a server run through the loads
# Mayfly is measured on (bench/pgo.sh); commit it with the figures.
pgo:
	bash bench/pgo.sh

# A development password, for loopback only: log in as Administrator / password.
DEV_PASSWORD ?= password
# More flags for `mayfly serve`, e.g. other ports when Couchbase or memcached
# already listen on 8091 or 11211:
#   make run ARGS="--http 127.0.0.1:9000 --memcached 127.0.0.1:9001"
ARGS ?=

run: build
	@echo "mayfly: development server; log in as Administrator / $(DEV_PASSWORD) (curl -u Administrator:$(DEV_PASSWORD) ...)"
	MAYFLY_ADMIN_PASSWORD=$(DEV_PASSWORD) ./$(BIN) serve --data $(DATA) $(ARGS)

# The lint (vet, gofmt), norace, race-more and sdk steps run even when the
# race step fails (their failures are worth seeing too); test fails if any
# did. They run one after the other beside the race step's `go test ./...`
# (their output held back and printed after it): the race step leaves the
# cores idle part of the time, waiting out elections and timeouts. The steps
# that build without the race detector go first, so that the others find
# most of ./...'s race builds in the build cache. Each step's time is printed
# at the end.
#
# Fuzzing is not part of test: every fuzz target's seeds (f.Add and
# testdata/fuzz) run as tests in the race step, and `make fuzz` explores
# new inputs. Fuzzing 300 inputs a target here cost ~90-160 CPU-s a run,
# most of it building and starting the instrumented binaries, on a budget
# of 10 minutes on two cores, and it made make test's outcome depend on
# random inputs.
test: deps tools
	@status=0; bg=$$(mktemp); t0=$$(date +%s); \
	{ st=0; for step in lint norace race-more sdk; do s0=$$(date +%s); \
	    $(MAKE) --no-print-directory $$step || st=1; echo "make test: $$step took $$(( $$(date +%s) - s0 )) s"; done; \
	  exit $$st; } >"$$bg" 2>&1 & bgpid=$$!; \
	$(MAKE) --no-print-directory race-all || status=1; t1=$$(date +%s); \
	wait $$bgpid || status=1; cat "$$bg"; rm -f "$$bg"; \
	echo "make test: race-all took $$(( t1 - t0 )) s, all the steps $$(( $$(date +%s) - t0 )) s"; \
	exit $$status

lint: vet fmt

vet:
	$(GO) vet $(PKGS)
	$(GO) vet -tags chaos ./cmd/mayfly/

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# -timeout catches a hang, nothing else: a package that takes a minute on a
# quiet machine can take ten on a busy 2-core runner under -race, and tests
# assert order and outcome, never speed (benchmarks measure that).
RACE_TIMEOUT ?= 30m
# Packages tested at once. Three on two cores: a fresh-clone run at two
# kept the CPU busy 59 % of the time (packages waiting out elections,
# leases and timeouts); tests assert outcomes, never speed, so a third
# package only fills the waits.
RACE_P ?= 3

race: race-all race-more

# The race step's longest packages, started first (go test starts packages
# in the order given): in alphabetical order the longest (httpapi, ~280 s of
# a busy run) started late and ran on alone at the end while a core idled.
# Longest first, the cores stay busy to the end.
RACE_FIRST ?= ./httpapi/ ./engine/ ./cmd/mayfly/ ./cluster/ ./index/ ./replica/ ./views/ ./internal/crashtest/ ./jsruntime/

race-all:
	$(GO) test -race -count=1 -p $(RACE_P) -timeout $(RACE_TIMEOUT) $(if $(filter ./...,$(PKGS)),$(RACE_FIRST)) $(PKGS)

# The tests the race step skips or shortens, whole and without the race
# detector: model tests of thousands of sequential steps, which it slows 5 to
# 40 times (TestModel in index: 0.7 s without it, 32 s with it) for no race
# to find where the code under test starts no goroutine. They call
# racebuild.Skip or racebuild.Scale (internal/racebuild); .ci/noracetargets
# finds them in the test files. Also cmd/mayfly's tests built with -tags
# chaos (the fault injection `make chaos` uses): the cut file's reading, and
# a three-process cluster test with one node's Raft traffic cut
# (TestChaosShedCopyLeavesACutOffNode); its processes are built without the
# race detector in any case, and the test binary's race build cost ~25 CPU-s
# on its own.
norace:
	@targets=$$(GO=$(GO) bash .ci/noracetargets $(PKGS)) || exit 1; \
	echo "$$targets" | while read -r pkg run; do \
		[ -n "$$pkg" ] || continue; \
		echo "norace $$pkg $$run"; \
		$(GO) test -count=1 -timeout $(RACE_TIMEOUT) -run "$$run" $$pkg || exit 1; \
	done
	$(GO) test -count=1 -timeout $(RACE_TIMEOUT) -tags chaos -run 'TestChaos' ./cmd/mayfly/

# The race step's runs with other flags: the memcached port's other I/O
# model, and a cluster test whose server processes are race-built too
# (MAYFLY_TEST_RACE_NODES: a race report in a node's output fails it; the
# race step's run them built without the detector,
# cmd/mayfly/nodebin_test.go).
race-more:
	$(GO) test -race -count=1 -timeout $(RACE_TIMEOUT) ./memcache/ -args -memcache.io=goroutines
	MAYFLY_TEST_RACE_NODES=1 $(GO) test -race -count=1 -timeout $(RACE_TIMEOUT) -run '^TestReplicatedClusterSurvivesKill$$' ./cmd/mayfly/

unit:
	$(GO) test -count=1 $(PKGS)

# Each fuzz target explores FUZZTIME inputs beyond its seeds (which `make
# test` runs as tests). The targets are read from the test files
# (.ci/fuzztargets), not listed by building every test binary. A package's
# instrumented test binary is built once for all its targets (`go test -c`,
# ~9 CPU-s in a fresh clone) and run in the package's directory; the inputs
# found are kept where `go test -fuzz` keeps them, in the build cache's fuzz
# corpus, and run again first the next time.
fuzz:
	@specs=$$(GO=$(GO) bash .ci/fuzztargets $(PKGS)) || exit 1; \
	bin=$$(mktemp -d) || exit 1; trap 'rm -rf "$$bin"' EXIT; \
	corpus=$$($(GO) env GOCACHE)/fuzz; \
	for pkg in $$(printf '%s\n' $$specs | cut -d: -f1 | uniq); do \
		dir=$$($(GO) list -f '{{.Dir}}' $$pkg) && \
		$(GO) test -c -fuzz . -o "$$bin/fuzz.test" $$pkg || exit 1; \
		for fn in $$(printf '%s\n' $$specs | grep "^$$pkg:" | cut -d: -f2); do \
			echo "fuzz $$pkg $$fn"; \
			(cd "$$dir" && "$$bin/fuzz.test" -test.run '^$$' -test.fuzz "^$$fn$$" -test.fuzztime $(FUZZTIME) \
				-test.fuzzcachedir "$$corpus/$$pkg" -test.timeout 10m -test.paniconexit0) || exit 1; \
		done; \
	done

# The official Couchbase Go SDK (gocb), unmodified, against Mayfly's KV
# port: its own module (sdktest/go.mod, Mayfly replaced by ../), so the
# SDK's dependencies stay out of Mayfly's. -mod=mod lets it follow a
# dependency Mayfly adds without a hand edit of sdktest/go.mod.
#
# The Node.js SDK's smoke test (sdktest/node) needs node and the couchbase
# npm package: Debian's nodejs and npm are installed when missing, then the
# package pinned in package-lock.json (npm ci, its prebuilt binary from the
# npm registry). Where that fails, TestNodeSDK skips, saying why.
sdk: node-sdk
	cd sdktest && $(GO) vet -mod=mod ./... && $(GO) test -mod=mod -race -count=1 -timeout $(RACE_TIMEOUT) ./...

#
# npm ci is tried twice (a registry's passing failure), and an install that
# failed, or whose package does not load here (its prebuilt binary), is
# removed: the test then skips instead of failing on a half install.
node-sdk:
	@command -v npm >/dev/null 2>&1 || { apt-get update -qq $(APT_RETRY) && apt-get install -y -qq $(APT_RETRY) nodejs npm; } || \
		echo "make sdk: could not install node and npm; the Node.js SDK test will skip"
	@test -f sdktest/node/node_modules/couchbase/package.json || ! command -v npm >/dev/null 2>&1 || \
		(cd sdktest/node && { npm ci --no-audit --no-fund || { sleep 10; npm ci --no-audit --no-fund; }; } && node -e 'require("couchbase")') || \
		{ rm -rf sdktest/node/node_modules; echo "make sdk: npm ci failed in sdktest/node, or its couchbase package does not load; the Node.js SDK test will skip"; }

bench:
	$(GO) test -run '^$$' -bench . -timeout 60m $(PKGS) | tee bench.out

# Bulk load against pouchdb-server in the same run (BENCHMARKS.md, "Bulk
# writes"); installs pouchdb-server with npm on first use. Not part of test.
bench-pouch:
	bash bench/pouch.sh

# Issue 19's large-scale run (BENCHMARKS.md, "Large-scale run (issue 19)"):
# bench/bigrun starts $(BIN) on a fresh data directory and free ports, loads
# DOCS documents of VALUE bytes into a QUOTA_MB bucket over the memcached
# port, builds a view, times random gets from a cold page cache and restarts,
# then runs the 16-client range queries. Figures go to bench-big.out. Not
# part of test. More flags: BIGRUN_ARGS="-phases range -range-time 60s".
DOCS     ?= 5000000
VALUE    ?= 1024
QUOTA_MB ?= 1024
BIGRUN_ARGS ?=

bench-big: build
	$(GO) run ./bench/bigrun -bin $(BIN) -docs $(DOCS) -value $(VALUE) -quota-mb $(QUOTA_MB) -out bench-big.out $(BIGRUN_ARGS)

# apt-get retries a failed download a few times (a mirror's passing failure).
APT_RETRY ?= -o Acquire::Retries=3

# The Go modules of Mayfly and of sdktest, downloaded before anything is
# built, three tries ten seconds apart: a module proxy's passing failure on
# a clean machine is not a test failure. (Already in the module cache: no
# network.)
deps:
	@for i in 1 2 3; do \
		$(GO) mod download && (cd sdktest && $(GO) mod download) && exit 0; \
		echo "make deps: go mod download failed (try $$i of 3)"; sleep 10; \
	done; exit 1

# Tools that tests need: a Chromium for the web console's browser tests
# (console/), Debian's chromium installed when none is found. Where it
# cannot be installed (not root, not Debian) those tests skip, saying so.
# memcached is only needed by `make oracle`.
tools:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || command -v google-chrome >/dev/null 2>&1 || \
		{ apt-get update -qq $(APT_RETRY) && apt-get install -y -qq $(APT_RETRY) chromium; } || \
		echo "make tools: could not install chromium; the console's browser tests will skip"

oracle:
	@command -v memcached >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq memcached libmemcached-tools; }
	$(GO) test -tags oracle -count=1 -run Oracle -bench GetSet -benchtime 300000x ./memcache/

# The crash test (internal/crashtest) for $(SOAK): the real server killed
# with SIGKILL under load, again and again; acknowledged writes and stale=false
# views are checked after every restart.
soak:
	MAYFLY_SOAK=$(SOAK) MAYFLY_CRASH_LEVEL=$(LEVEL) MAYFLY_CRASH_EVICTION=$(EVICTION) $(GO) test -run TestCrash -count=1 -timeout 24h -v ./internal/crashtest/

chaos:
	MAYFLY_CHAOS=$(CHAOS) MAYFLY_CHAOS_CASES=$(CASES) $(GO) test -run TestChaos -count=1 -timeout 2h -v ./internal/chaostest/

clean:
	rm -rf bin bench.out
