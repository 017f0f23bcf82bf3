#!/usr/bin/env bash
# The memcached port against memcached 1.6, in one run: memcached and
# `mayfly serve` (the memcached port served by goroutines, then by event
# loops; optionally another Mayfly build, BASE_BIN) alternated per round, each
# in its own process, the same generator for all (BenchmarkExternalMix: 50
# connections, one command at a time each, 1,000 keys of 100 bytes, 100,000
# operations per mix). Per server and mix it prints ops/s and the server's
# CPU time per operation (utime+stime from /proc, 10 ms ticks), and the
# server's resident memory after the three mixes. Not part of make test.
#
# Environment: ROUNDS (3), LEVEL (none: the bucket's durabilityMinLevel set
# to none by one REST call; default: Mayfly's durable default), BASE_BIN (a
# mayfly binary to run too, e.g. main's, on its default I/O), IOS (this
# build's I/O modes to run: "goroutines eventloop"), MIXES ("sets 1set4gets
# gets"), PORTS (memcached, Mayfly memcached and HTTP ports: 21211 21212
# 28091). Needs memcached on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
ROUNDS=${ROUNDS:-3}
LEVEL=${LEVEL:-none}
IOS=${IOS:-goroutines eventloop}
MIXES=${MIXES:-sets 1set4gets gets}
read -r MC_PORT MF_PORT HTTP_PORT <<<"${PORTS:-21211 21212 28091}"
PW=bench-memcached-io

command -v memcached >/dev/null || { echo "needs memcached (apt-get install memcached)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Every result line also goes to $work/results, which the summary at the end
# reads: per server and mix, the mean over the rounds of its rate divided by
# memcached's in the same round, and its mean CPU an operation.
exec > >(tee "$work/results")
go build -o "$work/mayfly" ./cmd/mayfly
go test -c -o "$work/mcbench" ./memcache/

ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
mixes() { # pid port label
	for mix in $MIXES; do
		local t0 t1 v
		t0=$(ticks "$1")
		v=$(MAYFLY_BENCH_ADDR=127.0.0.1:$2 "$work/mcbench" -test.run '^$' -test.bench "ExternalMix/^$mix\$" -test.benchtime 100000x 2>&1 |
			awk '/^BenchmarkExternalMix/ {for (i = 1; i <= NF; i++) if ($(i+1) == "ops/s") print $i}')
		t1=$(ticks "$1")
		echo "$3 $mix $v ops/s, server CPU $(((t1 - t0) * 100 / 1000)).$(((t1 - t0) * 100 % 1000 / 100)) us/op"
	done
	echo "$3 rss $(awk '/VmRSS/ {printf "%.1f", $2/1024}' "/proc/$1/status") MB"
}
for r in $(seq 1 "$ROUNDS"); do
	memcached -p "$MC_PORT" -l 127.0.0.1 -U 0 -u nobody &
	pid=$!
	waitport "$MC_PORT"
	mixes "$pid" "$MC_PORT" "round $r memcached"
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	for srv in ${BASE_BIN:+base} $IOS; do
		bin=$work/mayfly io=(--memcached-io "$srv")
		[ "$srv" = base ] && bin=$BASE_BIN io=()
		mkdir "$work/data"
		"$bin" serve --data "$work/data" --http "127.0.0.1:$HTTP_PORT" --memcached "127.0.0.1:$MF_PORT" \
			--kv "" --kv-tls "" --views "" --search "" --admin-password "$PW" "${io[@]}" >"$work/log" 2>&1 &
		pid=$!
		waitport "$MF_PORT"
		waitport "$HTTP_PORT"
		if [ "$LEVEL" = none ]; then
			curl -fsS -u "Administrator:$PW" -X POST "localhost:$HTTP_PORT/pools/default/buckets/default" -d durabilityMinLevel=none -o /dev/null
		fi
		mixes "$pid" "$MF_PORT" "round $r $srv $LEVEL"
		kill "$pid"
		wait "$pid" 2>/dev/null || true
		rm -rf "$work/data"
	done
done
# The summary: only means over many alternated rounds say anything on shared
# cores (single rounds of one binary spread by ±15 %).
sleep 0.2
awk '/^round / && /ops\/s/ {
	srv = ($3 == "memcached") ? "memcached" : $3 " " $4; mix = ($3 == "memcached") ? $4 : $5
	rate = ($3 == "memcached") ? $5 : $6; cpu = $(NF - 1)
	if (srv == "memcached") mc[$2, mix] = rate
	else { sum[srv, mix] += rate / mc[$2, mix]; n[srv, mix]++ }
	cs[srv, mix] += cpu; cn[srv, mix]++; seen[srv] = 1; mixes[mix] = 1
}
END {
	for (s in seen) for (m in mixes) if (cn[s, m]) {
		line = sprintf("mean %s %s: %.2f us CPU/op", s, m, cs[s, m] / cn[s, m])
		if (n[s, m]) line = line sprintf(", %.3fx memcached over %d rounds", sum[s, m] / n[s, m], n[s, m])
		print line
	}
}' "$work/results" | sort
