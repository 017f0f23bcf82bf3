#!/usr/bin/env bash
# Mayfly walk-through: loads a design document and a small data set with
# expiries into a running server, queries with include_docs and reduce, and
# shows an expired row as "doc": null until the expiry pager purges it.
#
#   make run                      # in another terminal
#   examples/walkthrough.sh       # MAYFLY_HOST=http://host:port to point elsewhere (as the CLI),
#                                 # MAYFLY_USER/MAYFLY_PASSWORD for other credentials
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
url=${MAYFLY_HOST:-${MAYFLY:-http://127.0.0.1:8091}} # as the mayfly CLI ($MAYFLY, its old name, still read)
bucket=${BUCKET:-default}
creds="${MAYFLY_USER:-Administrator}:${MAYFLY_PASSWORD:-password}" # make run's development password

say() { printf '\n== %s\n' "$*"; }
call() { curl -sS --fail-with-body -u "$creds" "$@"; }

# The story needs the pager to run only when it says so: stop the periodic
# pager for the walk-through (runExpiryPager still runs it) and put back
# whatever interval was set before, however the script ends.
pager="$url/pools/default/buckets/$bucket/settings/expiryPager"
settings=$(call "$pager") || { printf '%s\n' "$settings" >&2; exit 1; }
stime=$(printf '%s' "$settings" | sed -n 's/.*"exp_pager_stime":\([0-9]*\).*/\1/p')
call -o /dev/null -X POST "$pager" -d exp_pager_stime=0
trap 'call -o /dev/null -X POST "$pager" -d exp_pager_stime="${stime:-3600}"' EXIT

say "design document _design/scores"
call -X PUT -H 'Content-Type: application/json' --data-binary @"$here/scores-ddoc.json" "$url/$bucket/_design/scores"

say "loading $(grep -vc '^#' "$here/scores.txt") documents (two expire in 2 s)"
grep -v '^#' "$here/scores.txt" | while read -r key expiry doc; do
	curl -sS --fail-with-body -u "$creds" -o /dev/null -X PUT -H 'Content-Type: application/json' "$url/$bucket/docs/$key?expiry=$expiry" --data-binary "$doc"
done

say "all scores, with their documents"
call "$url/$bucket/_design/scores/_view/by_player?stale=false&reduce=false&include_docs=true"

say "statistics per player (group=true)"
call "$url/$bucket/_design/scores/_view/by_player?stale=false&group=true"

say "total per level (group_level=1)"
call "$url/$bucket/_design/scores/_view/by_level?stale=false&group_level=1"

say "waiting 3 s for the two session documents to expire"
sleep 3

say "expired rows are still indexed, their docs are null"
call "$url/$bucket/_design/scores/_view/by_player?stale=false&reduce=false&include_docs=true&startkey=%22ann%22&endkey=%22bo%22"

say "and they still count in the reduce until the pager purges them"
call "$url/$bucket/_design/scores/_view/by_player?stale=false"

say "running the expiry pager now"
call -X POST "$url/pools/default/buckets/$bucket/controller/runExpiryPager"

say "after the purge: rows gone, reduce corrected"
call "$url/$bucket/_design/scores/_view/by_player?stale=false"
call "$url/$bucket/_design/scores/_view/by_player?stale=false&reduce=false&startkey=%22ann%22&endkey=%22bo%22"
