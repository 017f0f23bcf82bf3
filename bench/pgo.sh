#!/usr/bin/env bash
# Regenerates cmd/mayfly/default.pgo, the CPU profile `go build` optimizes
# the server with (profile-guided optimization: `go build` picks up a
# main package's default.pgo by itself). The profile is taken from one
# `mayfly serve` (built without a profile) through the loads Mayfly is
# measured on, in one run:
#   - the memcached port's mixes (BenchmarkExternalMix: 50 connections, sets,
#     one set in five, gets), at the durable default and at
#     durabilityMinLevel=none;
#   - HTTP single-document PUTs (16 at a time), a design document's first
#     build and view queries (grouped reduce, key ranges, include_docs).
# The tests build the server with -pgo=off (the Makefile and
# internal/mayflybin): a build with a profile compiles every package again
# and takes about twice the CPU, once. Not part of make test.
#
# Environment: SECS (the profile's length, 60: the loads must end within
# it), DOCS (HTTP documents, 20000), PORTS (memcached, HTTP, pprof: 21212
# 28091 26061). Needs curl.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
SECS=${SECS:-60}
DOCS=${DOCS:-20000}
read -r MF_PORT HTTP_PORT PPROF_PORT <<<"${PORTS:-21212 28091 26061}"
PW=bench-pgo-password
work=$(mktemp -d)
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
go build -pgo=off -o "$work/mayfly" ./cmd/mayfly
go test -pgo=off -c -o "$work/mcbench" ./memcache/

api() { curl -fsS --no-progress-meter -u "Administrator:$PW" "$@"; }
mixes() {
	for mix in sets 1set4gets gets; do
		MAYFLY_BENCH_ADDR=127.0.0.1:$MF_PORT "$work/mcbench" -test.run '^$' \
			-test.bench "ExternalMix/^$mix\$" -test.benchtime 100000x | grep ops/s
	done
}

"$work/mayfly" serve --data "$work/data" --http "127.0.0.1:$HTTP_PORT" --memcached "127.0.0.1:$MF_PORT" \
	--kv "" --kv-tls "" --views "" --search "" --admin-password "$PW" \
	--pprof "127.0.0.1:$PPROF_PORT" >"$work/log" 2>&1 &
pid=$!
waitport "$MF_PORT"
waitport "$HTTP_PORT"
waitport "$PPROF_PORT"
start=$(date +%s)
curl -fsS "127.0.0.1:$PPROF_PORT/debug/pprof/profile?seconds=$SECS" -o "$work/cpu.pprof" &
prof=$!

mixes
api -X POST "localhost:$HTTP_PORT/pools/default/buckets/default" -d durabilityMinLevel=none -o /dev/null
mixes

# Single PUTs, 16 connections at a time (curl's --parallel, keep-alive).
for i in $(seq 1 "$DOCS"); do
	printf 'url = "http://localhost:%s/default/docs/d%s"\noutput = "/dev/null"\n' "$HTTP_PORT" "$i"
done >"$work/puts"
api -Z --parallel-max 16 -X PUT -d '{"type":"order","n":7,"v":12.5,"tags":["a","b"]}' \
	-K "$work/puts"
api -X PUT "localhost:$HTTP_PORT/default/_design/pgo" -H 'Content-Type: application/json' \
	-d '{"views":{"byn":{"map":"function (doc, meta) { if (doc.type) emit([doc.type, meta.id], doc.v); }","reduce":"_sum"}}}' -o /dev/null
api "localhost:$HTTP_PORT/default/_design/pgo/_view/byn?stale=false&limit=1" -o /dev/null
view="http://localhost:$HTTP_PORT/default/_design/pgo/_view/byn"
for i in $(seq 1 3000); do
	case $((i % 3)) in
	0) echo "url = \"$view?group_level=1\"" ;;
	1) echo "url = \"$view?reduce=false&startkey=%5B%22order%22%2C%22d$i%22%5D&limit=20\"" ;;
	2) echo "url = \"$view?reduce=false&include_docs=true&skip=$i&limit=10\"" ;;
	esac
	echo 'output = "/dev/null"'
done >"$work/queries"
api -Z --parallel-max 16 -K "$work/queries"

took=$(($(date +%s) - start))
if [ "$took" -ge "$SECS" ]; then
	echo "the loads took ${took} s, longer than the profile (SECS=$SECS): raise SECS" >&2
	exit 1
fi
wait "$prof"
cp "$work/cpu.pprof" cmd/mayfly/default.pgo
echo "cmd/mayfly/default.pgo: $(wc -c <cmd/mayfly/default.pgo) bytes, loads ${took} s of ${SECS}"
