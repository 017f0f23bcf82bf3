#!/usr/bin/env bash
# Resident memory of the memcached port's benchmark against memcached 1.6,
# in one run: memcached, then `mayfly serve` (optionally another build too,
# BASE_BIN) with its memcached port on a bucket of each type in turn, each
# in its own process, the same generator for all (BenchmarkExternalMix: 50
# connections, one command at a time each, 1,000 keys of 100 bytes, 100,000
# operations per mix). Per server it prints the ops/s of the three mixes and
# its resident memory (VmRSS, and its anonymous and file-backed parts, from
# /proc/PID/status) idle (5 s after its port opened), right after the
# mixes, and AFTER seconds later.
# The Mayfly binary is copied into place with small writes, as an
# installation writes it (BENCHMARKS.md, "the page cache's folios").
# Not part of make test.
#
# Environment: ROUNDS (2), TYPES (couchbase ephemeral memcached: the bucket
# the port serves; couchbase is the default bucket at Mayfly's durable
# default, the others are made by one REST call at their defaults), AFTER
# (35), BASE_BIN, EXTRA (more `mayfly serve` flags), PORTS (memcached,
# Mayfly memcached and HTTP ports: 21211 21212 28091). Needs memcached on
# PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-2}
TYPES=${TYPES:-couchbase ephemeral memcached}
AFTER=${AFTER:-35}
read -r MC_PORT MF_PORT HTTP_PORT <<<"${PORTS:-21211 21212 28091}"
PW=bench-memcached-rss

command -v memcached >/dev/null || { echo "needs memcached (apt-get install memcached)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/mayfly.built" ./cmd/mayfly
dd if="$work/mayfly.built" of="$work/mayfly" bs=64k status=none
chmod +x "$work/mayfly"
if [ -n "${BASE_BIN:-}" ]; then
	dd if="$BASE_BIN" of="$work/base" bs=64k status=none
	chmod +x "$work/base"
fi
go test -c -o "$work/mcbench" ./memcache/

waitport() {
	for _ in $(seq 1 300); do
		(echo >"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		sleep 0.1
	done
	echo "port $1 never opened" >&2
	return 1
}
rss() { awk '/^(VmRSS|RssAnon|RssFile)/ {v[$1] = $2} END {printf "%.1f (%.1f + %.1f)", v["VmRSS:"]/1024, v["RssAnon:"]/1024, v["RssFile:"]/1024}' "/proc/$1/status"; }
mixes() { # pid port label
	local idle rates="" v
	sleep 5 # start-up's memory given back, the binary's pages released
	sleep 5 # start-up's memory given back, the binary's pages released
	idle=$(rss "$1")
	for mix in sets 1set4gets gets; do
		v=$(MAYFLY_BENCH_ADDR=127.0.0.1:$2 "$work/mcbench" -test.run '^$' -test.bench "ExternalMix/^$mix\$" -test.benchtime 100000x 2>&1 |
			awk '/^BenchmarkExternalMix/ {for (i = 1; i <= NF; i++) if ($(i+1) == "ops/s") print $i}')
		rates="$rates $v"
	done
	local after
	after=$(rss "$1")
	sleep "$AFTER"
	echo "$3: ops/s$rates; RSS MB idle $idle, after $after, +${AFTER}s $(rss "$1")"
}
serve() { # bin data-dir extra-args...
	local bin=$1 dir=$2
	shift 2
	"$bin" serve --data "$dir" --http "127.0.0.1:$HTTP_PORT" --memcached "127.0.0.1:$MF_PORT" \
		--kv "" --kv-tls "" --views "" --search "" --admin-password "$PW" ${EXTRA:-} "$@" >>"$work/log" 2>&1 &
	pid=$!
	waitport "$MF_PORT"
	waitport "$HTTP_PORT"
}
for r in $(seq 1 "$ROUNDS"); do
	memcached -p "$MC_PORT" -l 127.0.0.1 -U 0 -u nobody &
	pid=$!
	waitport "$MC_PORT"
	mixes "$pid" "$MC_PORT" "round $r memcached"
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	for bin in ${BASE_BIN:+base} mayfly; do
		for typ in $TYPES; do
			mkdir "$work/data"
			bucket=default
			if [ "$typ" != couchbase ]; then
				# The bucket first, then a server whose port serves it.
				serve "$work/$bin" "$work/data"
				curl -fsS -u "Administrator:$PW" -X POST "localhost:$HTTP_PORT/pools/default/buckets" \
					-d name=mc -d bucketType="$typ" -o /dev/null
				kill "$pid"
				wait "$pid" 2>/dev/null || true
				bucket=mc
			fi
			serve "$work/$bin" "$work/data" --memcached-bucket "$bucket"
			mixes "$pid" "$MF_PORT" "round $r $bin $typ"
			kill "$pid"
			wait "$pid" 2>/dev/null || true
			rm -rf "$work/data"
		done
	done
done
