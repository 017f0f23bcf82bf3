#!/usr/bin/env bash
# Views on a 3-node cluster (issue 22): rows in each node's own view index
# and a view's first build (from the design document's PUT to a stale=false
# answer; wall time and the nodes' CPU seconds), for the binary built here and, with
# BASE_BIN, another one, alternately in one run. Three processes on
# loopback, replicaNumber 2 (every node holds a copy of every partition).
# Not part of make test.
#
# Environment: N (documents, 30000), BATCH (documents per _bulk request,
# 1000), RUNS (rounds, 2), BASE_BIN (a mayfly binary to compare with),
# PORT (first of the ports used, 27000).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-30000}
BATCH=${BATCH:-1000}
RUNS=${RUNS:-2}
PORT=${PORT:-27000}
work=$(mktemp -d)
go build -o "$work/mayfly" ./cmd/mayfly
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
auth=(-s -u Administrator:password)

# cpu prints the CPU seconds (user and system) the nodes used so far.
cpu() {
	local p ticks=0
	for p in "${pids[@]}"; do
		ticks=$((ticks + $(awk '{print $14 + $15}' "/proc/$p/stat")))
	done
	echo "scale=2; $ticks / $(getconf CLK_TCK)" | bc
}

# run BIN LABEL: one cluster, one load, one build, the rows per node.
run() {
	local bin=$1 label=$2 peers="" i
	rm -rf "$work/d1" "$work/d2" "$work/d3"
	for i in 1 2 3; do peers+="${peers:+,}n$i=127.0.0.1:$((PORT + 10 * i))"; done
	pids=()
	for i in 1 2 3; do
		MAYFLY_ADMIN_PASSWORD=password "$bin" serve --data "$work/d$i" --http "127.0.0.1:$((PORT + 100 + i))" \
			--memcached '' --kv '' --views '' --search '' --log-level error --node "n$i" --peers "$peers" \
			--cluster-lease 3s >"$work/n$i.log" 2>&1 &
		pids+=($!)
	done
	for i in 1 2 3; do
		until curl "${auth[@]}" -o /dev/null "http://127.0.0.1:$((PORT + 100 + i))/pools/default/b/default" 2>/dev/null; do sleep 0.5; done
	done
	local n1="http://127.0.0.1:$((PORT + 101))" from=0
	while [ "$from" -lt "$N" ]; do
		python3 -c "import sys; f,b,n=map(int,sys.argv[1:]); print('\n'.join('{\"op\":\"upsert\",\"id\":\"k%d\",\"doc\":{\"v\":%d,\"pad\":\"%s\"}}' % (i,i,'x'*100) for i in range(f,min(f+b,n))))" "$from" "$BATCH" "$N" >"$work/bulk.ndjson"
		# Written again until no line fails (a partition electing at start).
		until curl "${auth[@]}" -f -H 'Content-Type: application/x-ndjson' --data-binary "@$work/bulk.ndjson" "$n1/default/_bulk" >"$work/bulk.out" &&
			! grep -q '"error"' "$work/bulk.out"; do sleep 0.5; done
		from=$((from + BATCH))
	done
	sleep 5 # the coverage map written and applied by every node
	# The build: from the design document's PUT to a stale=false answer
	# (every node builds its index meanwhile, and the answer waits for
	# each), in wall time and in CPU seconds of the three processes.
	local t0 t1 c0 c1 answer
	c0=$(cpu)
	t0=$(date +%s.%N)
	curl "${auth[@]}" -o /dev/null -X PUT -H 'Content-Type: application/json' \
		--data '{"views":{"v":{"map":"function (doc, meta) { emit(doc.v, null); }","reduce":"_count"}}}' "$n1/default/_design/d"
	for i in 1 2 3; do
		until curl "${auth[@]}" -f -o /dev/null "http://127.0.0.1:$((PORT + 100 + i))/default/_design/d" 2>/dev/null; do sleep 0.1; done
	done
	answer=$(curl "${auth[@]}" "$n1/default/_design/d/_view/v?stale=false&connection_timeout=600000" | tr -d '\r\n')
	t1=$(date +%s.%N)
	c1=$(cpu)
	local rows=""
	for i in 1 2 3; do
		rows+=" n$i=$(curl "${auth[@]}" "http://127.0.0.1:$((PORT + 100 + i))/default/_design/d/_info" | python3 -c 'import json,sys; print(json.load(sys.stdin)["views"]["v"]["total_rows"])')"
	done
	printf '%s: build %.1f s, %.1f CPU s, answer %s, rows per node:%s\n' "$label" "$(echo "$t1 - $t0" | bc)" "$(echo "$c1 - $c0" | bc)" "$answer" "$rows"
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
}

for r in $(seq "$RUNS"); do
	run "$work/mayfly" "this (round $r)"
	if [ -n "${BASE_BIN:-}" ]; then run "$BASE_BIN" "base (round $r)"; fi
done
