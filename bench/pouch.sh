#!/usr/bin/env bash
# Bulk load, Mayfly's POST /{bucket}/_bulk against pouchdb-server's
# POST /{db}/_bulk_docs, in the same run, over real HTTP: the same small
# documents (default 300,000), fsync'd storage on both sides (Mayfly
# persisted bucket without --no-sync; pouchdb-server's LevelDB), runs
# interleaved. Installs pouchdb-server with npm into $POUCH_DIR the first
# time (npm registry). Not part of make test: `make bench-pouch`.
#
# Environment: N (documents, 300000), RUNS (rounds, 3), BATCH (documents per
# _bulk_docs request, 1000), POUCH_DIR (/tmp/mayfly-pouchdb-server), PORTS
# (Mayfly HTTP and pouchdb-server ports: 18391 15985).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-300000}
RUNS=${RUNS:-3}
BATCH=${BATCH:-1000}
POUCH_DIR=${POUCH_DIR:-/tmp/mayfly-pouchdb-server}
read -r MF_PORT PD_PORT <<<"${PORTS:-18391 15985}"
POUCH_VERSION=4.2.0

command -v npm >/dev/null || { echo "bench-pouch needs node and npm (apt-get install nodejs npm)" >&2; exit 1; }
if [ ! -x "$POUCH_DIR/node_modules/.bin/pouchdb-server" ]; then
	mkdir -p "$POUCH_DIR"
	[ -f "$POUCH_DIR/package.json" ] || echo '{"name":"mayfly-bench-pouch","private":true}' >"$POUCH_DIR/package.json"
	(cd "$POUCH_DIR" && npm install --no-audit --no-fund "pouchdb-server@$POUCH_VERSION" >npm.log 2>&1) ||
		{ echo "npm install pouchdb-server failed: see $POUCH_DIR/npm.log" >&2; exit 1; }
fi

work=$(mktemp -d)
go build -o "$work/mayfly" ./cmd/mayfly
go build -o "$work/bulkcompare" ./bench/bulkcompare
pids=()
cleanup() {
	rc=$?
	if [ "$rc" != 0 ]; then
		echo "--- mayfly log"; tail -20 "$work/mayfly.log" 2>/dev/null
		echo "--- pouchdb-server log"; tail -20 "$work/pouch.log" 2>/dev/null
	fi >&2
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

"$work/mayfly" serve --data "$work/mayfly-data" --http "127.0.0.1:$MF_PORT" --memcached "" \
	--admin-password benchpass --log-level warn --read-timeout 10m >"$work/mayfly.log" 2>&1 &
pids+=($!)
mkdir -p "$work/pouch-data"
# pouchdb-server writes config.json and log.txt into its working directory.
(cd "$work" && exec "$POUCH_DIR/node_modules/.bin/pouchdb-server" --port "$PD_PORT" --dir "$work/pouch-data" >"$work/pouch.log" 2>&1) &
pids+=($!)
ready() { for _ in $(seq 150); do curl -sf -o /dev/null "$@" && return 0; sleep 0.2; done; echo "not answering: $*" >&2; return 1; }
ready -u Administrator:benchpass "http://127.0.0.1:$MF_PORT/pools/default/buckets"
ready "http://127.0.0.1:$PD_PORT/"

echo "# $(date -u +%FT%TZ) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); N=$N, _bulk_docs batches of $BATCH"
for r in $(seq "$RUNS"); do
	"$work/bulkcompare" -target mayfly -url "http://127.0.0.1:$MF_PORT" -user Administrator -pass benchpass -db "one$r" -n "$N" -batch 0
	"$work/bulkcompare" -target pouch -url "http://127.0.0.1:$PD_PORT" -db "bench$r" -n "$N" -batch "$BATCH"
	"$work/bulkcompare" -target mayfly -url "http://127.0.0.1:$MF_PORT" -user Administrator -pass benchpass -db "batched$r" -n "$N" -batch "$BATCH"
done
