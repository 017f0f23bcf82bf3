#!/usr/bin/env bash
# Mayfly sessions walk-through: per-collection time to live. A "carts"
# collection with Cosmos DB's defaultTTL and a document's own ttl field, and a
# "sessions" collection whose keys slide: every read moves the expiration to
# min(now + idleTTL, created + maxLifetime). Then a bucket of sessions counted
# by a view with expired=exclude: the exact count of live sessions matches
# the rows at every step, before any pager run. Waits about 15 s of wall clock
# (with ADVANCE set, the URL of a test's clock, it moves that clock instead).
#
#   make run                      # in another terminal
#   examples/sessions.sh          # MAYFLY_HOST=http://host:port to point elsewhere (as the CLI),
#                                 # MAYFLY_USER/MAYFLY_PASSWORD for other credentials
set -euo pipefail
url=${MAYFLY_HOST:-${MAYFLY:-http://127.0.0.1:8091}} # as the mayfly CLI ($MAYFLY, its old name, still read)
bucket=${BUCKET:-default}
creds="${MAYFLY_USER:-Administrator}:${MAYFLY_PASSWORD:-password}" # make run's development password
admin="$url/pools/default/buckets/$bucket"
scope=${SCOPE:-app$$}

say() { printf '\n== %s\n' "$*"; }
call() { curl -sS --fail-with-body -u "$creds" "$@"; echo; }
status() { curl -sS -o /dev/null -w '%{http_code}' -u "$creds" "$@"; }
pause() { # wait $1 seconds: of wall clock, or of the test's clock (ADVANCE)
  if [ -n "${ADVANCE:-}" ]; then curl -sS --fail-with-body -X POST "$ADVANCE?seconds=$1" >/dev/null; else sleep "$1"; fi
}
expiration() { curl -sS -u "$creds" -D - -o /dev/null "$url/$bucket/docs/$1?collection=$scope.$2" | tr -d '\r' | sed -n 's/^X-Mayfly-Expiration: //Ip'; }

say "scope $scope"
call -X POST "$admin/scopes" -d name="$scope"

say "carts: defaultTTL=3600 (documents expire an hour after their last write)"
call -X POST "$admin/scopes/$scope/collections" -d name=carts -d defaultTTL=3600
call -X PUT -H 'Content-Type: application/json' "$url/$bucket/docs/cart1?collection=$scope.carts" --data-binary '{"items":3}'
call -X PUT -H 'Content-Type: application/json' "$url/$bucket/docs/cart2?collection=$scope.carts" --data-binary '{"items":1,"ttl":60}'
call -X PUT -H 'Content-Type: application/json' "$url/$bucket/docs/cart3?collection=$scope.carts" --data-binary '{"items":9,"ttl":-1}'
say "a ttl that is not -1 or a positive integer is refused"
curl -sS -u "$creds" -X PUT -H 'Content-Type: application/json' "$url/$bucket/docs/cart4?collection=$scope.carts" --data-binary '{"ttl":0}'
echo

say "removing defaultTTL re-evaluates the collection: nothing there expires any more"
call -X PATCH "$admin/scopes/$scope/collections/carts" -d defaultTTL=null
echo "cart1 expiration: $(expiration cart1 carts)  cart2 expiration: $(expiration cart2 carts)"

say "sessions: idleTTL=4, maxLifetime=7"
call -X POST "$admin/scopes/$scope/collections" -d name=sessions -d idleTTL=4 -d maxLifetime=7
call -X PUT -H 'Content-Type: application/json' "$url/$bucket/docs/used?collection=$scope.sessions" --data-binary '{"user":"ann"}'
call -X PUT -H 'Content-Type: application/json' "$url/$bucket/docs/forgotten?collection=$scope.sessions" --data-binary '{"user":"bo"}'

say "2 s later, a read of 'used' slides its expiration"
pause 2
status "$url/$bucket/docs/used?collection=$scope.sessions"
echo
pause 2.2

say "4 s after the writes: 'forgotten' is gone, 'used' is not"
echo "forgotten: $(status "$url/$bucket/docs/forgotten?collection=$scope.sessions")"
echo "used: $(status "$url/$bucket/docs/used?collection=$scope.sessions")"
pause 0.3

say "reads never carry 'used' past created + maxLifetime"
call "$url/$bucket/docs/used?collection=$scope.sessions&meta=true"
meta=$(curl -sS -u "$creds" "$url/$bucket/docs/used?collection=$scope.sessions&meta=true")
created=$(printf '%s' "$meta" | sed -n 's/.*"created":\([0-9]*\).*/\1/p')
exp=$(printf '%s' "$meta" | sed -n 's/.*"expiration":\([0-9]*\).*/\1/p')
echo "expiration - created = $((exp - created))"

say "ep_sliding_extends"
call "$admin/stats" | tr ',' '\n' | grep ep_sliding_extends

# Views index a bucket's default collection: a bucket of sessions whose
# default collection slides, with a view counting them.
sb=${SESSIONS_BUCKET:-sessions$$}
live() { # the view's exact answer: rows, then the _count
  # The rows are counted again after the _count: live sessions only end
  # while this runs (nothing reads them), so equal counts before and after
  # mean no expiry fell between the two answers; else they are asked again.
  local rows count after tries=0
  while :; do
    rows=$(curl -sS -u "$creds" "$url/$sb/_design/s/_view/by_user?reduce=false&expired=exclude&stale=false" | grep -c '"id"' || true)
    count=$(curl -sS -u "$creds" "$url/$sb/_design/s/_view/by_user?expired=exclude&stale=false" | sed -n 's/.*"value":\([0-9]*\).*/\1/p')
    after=$(curl -sS -u "$creds" "$url/$sb/_design/s/_view/by_user?reduce=false&expired=exclude&stale=false" | grep -c '"id"' || true)
    tries=$((tries + 1))
    [ "$rows" = "$after" ] || [ "$tries" -ge 5 ] && break
  done
  echo "live rows: $rows  exact _count: ${count:-0}  (Couchbase's count, expired=include: $(curl -sS -u "$creds" "$url/$sb/_design/s/_view/by_user?stale=false" | sed -n 's/.*"value":\([0-9]*\).*/\1/p'))"
}

say "bucket $sb: its default collection has idleTTL=4, maxLifetime=9; a _count view of sessions"
call -X POST "$url/pools/default/buckets" -d name="$sb" -d bucketType=couchbase
call -X PATCH "$url/pools/default/buckets/$sb/scopes/_default/collections/_default" -d idleTTL=4 -d maxLifetime=9
call -X PUT -H 'Content-Type: application/json' "$url/$sb/_design/s" \
  --data-binary '{"views":{"by_user":{"map":"function(doc){emit(doc.user, null)}","reduce":"_count"}}}'
for s in a b c d; do
  call -X PUT -H 'Content-Type: application/json' "$url/$sb/docs/$s" --data-binary "{\"user\":\"$s\"}"
done
live

say "every 2 s, sessions a and b are read (and slide); c and d are not"
for step in 1 2 3 4 5; do
  pause 2
  status "$url/$sb/docs/a" >/dev/null
  status "$url/$sb/docs/b" >/dev/null
  echo "step $step: $(live)"
done

say "no session outlives created + maxLifetime, however often it is read"
echo "a: $(status "$url/$sb/docs/a")  b: $(status "$url/$sb/docs/b")"
call -X DELETE "$url/pools/default/buckets/$sb"
