#!/usr/bin/env bash
# Resident memory of the memcached port's benchmark against memcached 1.6,
# in one run: memcached, then `mayfly serve` (optionally another build too,
# BASE_BIN) with its memcached port on a bucket of each type in turn, each
# in its own process, the same generator for all (BenchmarkExternalMix: 50
# connections, one command at a time each, 1,000 keys of 100 bytes, 100,000
# operations per mix). Per server it prints the ops/s of the three mixes,
# its CPU time a set (utime+stime from /proc, 10 ms ticks) and its resident
# memory (VmRSS, and its anonymous and file-backed parts, from
# /proc/PID/status): idle (5 s after its port opened), during the mixes
# (the largest of samples taken every 0.2 s, and VmHWM, the kernel's peak,
# reset when the mixes start), right after the mixes, and AFTER seconds
# later.
# The Mayfly binary is copied into place with small writes, as an
# installation writes it (BENCHMARKS.md, "the page cache's folios").
# Not part of make test.
#
# Environment: ROUNDS (2), TYPES (couchbase ephemeral memcached: the bucket
# the port serves; couchbase is the default bucket at Mayfly's durable
# default, the others are made by one REST call at their defaults), AFTER
# (35), BASE_BIN, EXTRA (more `mayfly serve` flags), VARIANTS (this build
# run once per variant, a variant being `mayfly serve` flags, variants
# separated by `;`, e.g. "--heap-ratio 0;" for with and without; the empty
# variant runs the defaults), LEVEL (the couchbase bucket's
# durabilityMinLevel: default or none, set by one REST call), PORTS (memcached,
# Mayfly memcached and HTTP ports: 21211 21212 28091). Needs memcached on
# PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
ROUNDS=${ROUNDS:-2}
TYPES=${TYPES:-couchbase ephemeral memcached}
AFTER=${AFTER:-35}
LEVEL=${LEVEL:-default}
VARIANTS=${VARIANTS:-}
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

rss() { awk '/^(VmRSS|RssAnon|RssFile)/ {v[$1] = $2} END {printf "%.1f (%.1f + %.1f)", v["VmRSS:"]/1024, v["RssAnon:"]/1024, v["RssFile:"]/1024}' "/proc/$1/status"; }
kb() { awk -v f="$2:" '$1 == f {print $2}' "/proc/$1/status"; }
ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
sampler() { # pid out: the largest VmRSS (KiB) sampled every 0.2 s, written to out until killed
	local max=0 v
	trap 'echo "$max" >"$2"; exit 0' TERM
	while v=$(kb "$1" VmRSS 2>/dev/null) && [ -n "$v" ]; do
		[ "$v" -gt "$max" ] && max=$v
		echo "$max" >"$2"
		sleep 0.2
	done
}
mixes() { # pid port label
	local idle rates="" v t0 t1 setcpu="" spid
	sleep 5 # start-up's memory given back, the binary's pages released
	idle=$(rss "$1")
	echo 5 >"/proc/$1/clear_refs" 2>/dev/null || true # VmHWM from here
	sampler "$1" "$work/max" &
	spid=$!
	for mix in sets 1set4gets gets; do
		t0=$(ticks "$1")
		v=$(MAYFLY_BENCH_ADDR=127.0.0.1:$2 "$work/mcbench" -test.run '^$' -test.bench "ExternalMix/^$mix\$" -test.benchtime 100000x 2>&1 |
			awk '/^BenchmarkExternalMix/ {for (i = 1; i <= NF; i++) if ($(i+1) == "ops/s") print $i}')
		t1=$(ticks "$1")
		[ "$mix" = sets ] && setcpu="$(((t1 - t0) * 100 / 1000)).$(((t1 - t0) * 100 % 1000 / 100))"
		rates="$rates $v"
	done
	kill "$spid"
	wait "$spid" 2>/dev/null || true
	local after during peak
	after=$(rss "$1")
	during=$(awk '{printf "%.1f", $1/1024}' "$work/max")
	peak=$(kb "$1" VmHWM | awk '{printf "%.1f", $1/1024}')
	sleep "$AFTER"
	echo "$3: ops/s$rates; set CPU ${setcpu} us; RSS MB idle $idle, during max $during (peak $peak), after $after, +${AFTER}s $(rss "$1")"
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
	IFS=';' read -r -a variants <<<"${VARIANTS};"
	[ ${#variants[@]} -eq 0 ] && variants=("")
	runs=()
	[ -n "${BASE_BIN:-}" ] && runs+=("base|")
	for v in "${variants[@]}"; do runs+=("mayfly|$v"); done
	for run in "${runs[@]}"; do
		bin=${run%%|*} flags=${run#*|}
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
			# shellcheck disable=SC2086 # the variant's flags are words
			serve "$work/$bin" "$work/data" --memcached-bucket "$bucket" $flags
			if [ "$typ" = couchbase ] && [ "$LEVEL" = none ]; then
				curl -fsS -u "Administrator:$PW" -X POST "localhost:$HTTP_PORT/pools/default/buckets/default" \
					-d durabilityMinLevel=none -o /dev/null
			fi
			mixes "$pid" "$MF_PORT" "round $r $bin${flags:+ [$flags]} $typ"
			kill "$pid"
			wait "$pid" 2>/dev/null || true
			rm -rf "$work/data"
		done
	done
done
